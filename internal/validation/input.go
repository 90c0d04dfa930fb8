package validation

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// ---------------------------------------------------------------------------------------
// Text, numbers and consent times from hostile input: one rule for every door (the REST
// decoder, the hosted flow, the forms and the admission webhooks).

// Messages of the rules below.
const (
	msgControl     = "String should not contain control characters"
	msgUTF8        = "String should be valid UTF-8"
	msgNumber      = "Input should be a valid number"
	msgFinite      = "Input should be a finite number"
	msgConsentSoon = "Consent time must not be in the future"
)

// MaxClockSkew is how far in the future a consent time may be and still be taken as "now":
// a client's clock a little ahead of the server's gives a consent a few seconds or minutes
// in the future.
const MaxClockSkew = 5 * time.Minute

// IsControl reports whether r is a control character refused in single-line text: the C0
// controls U+0000–U+001F (tab, newline and carriage return included), DEL U+007F, the C1
// controls U+0080–U+009F, and the line and paragraph separators U+2028 and U+2029 (line
// breaks in all but name).
func IsControl(r rune) bool {
	return r <= 0x1f || (r >= 0x7f && r <= 0x9f) || r == '\u2028' || r == '\u2029'
}

// SingleLineText refuses text that is not valid UTF-8 or holds a control character (see
// IsControl), with Type "value_error" and a message naming the first one and where it is
// (1-based, in characters): "String should not contain control characters, found U+0000 at
// character 7". Call it on every free-text field a request, form or object carries (street
// address, external ids, model, serial number, names) before storing it.
func SingleLineText(s string) error {
	if !utf8.ValidString(s) {
		return newError("value_error", msgUTF8)
	}
	n := 0
	for _, r := range s {
		n++
		if IsControl(r) {
			return newError("value_error", fmt.Sprintf("%s, found U+%04X at character %d", msgControl, r, n))
		}
	}
	return nil
}

// FiniteNumber refuses NaN, +Inf and -Inf (Type "finite_number", as the REST decoder's
// "Input should be a finite number"), so that no non-finite number reaches a store or a JSON
// encoder (which answers 500 on one).
func FiniteNumber(x float64) error {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return newError("finite_number", msgFinite)
	}
	return nil
}

// decimalRE is a number as people type it: an optional sign, digits with an optional
// fraction (or a fraction alone), and an optional exponent. No NaN, Inf or Infinity (which
// strconv.ParseFloat takes), no hexadecimal, no underscores, no decimal comma.
var decimalRE = regexp.MustCompile(`^[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?$`)

// ParseNumber reads a number typed as text (a form field; surrounding whitespace ignored)
// and answers it finite: text that is not a decimal number ("NaN", "Infinity", "7,4",
// "0x1p3") fails with Type "float_type" (the REST decoder's "Input should be a valid
// number" for a string where a number belongs); a decimal number beyond float64 ("1e309")
// with Type "finite_number". Use it instead of strconv.ParseFloat on client input.
func ParseNumber(text string) (float64, error) {
	s := strings.TrimSpace(text)
	if !decimalRE.MatchString(s) {
		return 0, newError("float_type", msgNumber)
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, newError("finite_number", msgFinite)
	}
	return x, FiniteNumber(x)
}

// ValidateConsentTime refuses a consent time out of the supported range (TimeInRange), or in
// the future (beyond MaxClockSkew of now) with Type "value_error", as ValidateInstallationDate
// refuses a future date: a consent cannot have been given later than it is recorded.
func ValidateConsentTime(t, now time.Time) error {
	if err := TimeInRange(t); err != nil {
		return err
	}
	if t.After(now.Add(MaxClockSkew)) {
		return newError("value_error", msgConsentSoon)
	}
	return nil
}

// ParseConsentTime parses a consent timestamp (ParseAwareTimestamp: it must carry a zone)
// and refuses one in the future (ValidateConsentTime): gave_boundary_meter_consent_at,
// "9999-12-31T23:59:59Z" included.
func ParseConsentTime(s string, now time.Time) (time.Time, error) {
	t, err := ParseAwareTimestamp(s)
	if err != nil {
		return time.Time{}, err
	}
	if err := ValidateConsentTime(t, now); err != nil {
		return time.Time{}, err
	}
	return t, nil
}
