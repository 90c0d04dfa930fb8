// Package validation holds the domain validation rules of Flexsite: MPANs, UK postcodes,
// e-mail addresses, timestamps, dates, UUIDs, and the rules for hostile input (control
// characters in text, non-finite numbers, consent times in the future).
//
// There is exactly one copy of each rule, and it lives here. The REST API uses these
// functions to build its 422 error records ({"loc": [...], "msg": ..., "type": ...}, in the
// style of FastAPI/pydantic v2) and the Kubernetes admission webhooks use the very same
// functions to accept or deny objects, so a value the API accepts is never refused by the
// cluster, and vice versa. Do not re-implement a rule elsewhere; extend it here.
//
// The functions are pure: no I/O, no clock (callers pass "now"), no Kubernetes imports.
// Every failure is an *Error whose Type and Msg map directly onto an error record.
package validation

import (
	"fmt"
	"net/mail"
	"regexp"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Error is a validation failure: Type is a short machine code in the style of pydantic v2
// error types, Msg a human sentence (no trailing period needed).
type Error struct{ Type, Msg string }

// Error returns Msg.
func (e *Error) Error() string { return e.Msg }

// newError returns an *Error as an error; returning the pointer through this helper keeps
// callers from ever handing back a typed nil.
func newError(typ, msg string) error { return &Error{Type: typ, Msg: msg} }

// Messages shared by several return paths.
const (
	msgMPANLength     = "MPAN must be exactly 13 digits"
	msgMPANCheckDigit = "MPAN check digit is invalid"
	msgPostcode       = "postcode is not a valid UK postcode"
	msgEmail          = "email is not a valid email address"
	msgDate           = "Input should be a valid date in the format YYYY-MM-DD"
)

// ---------------------------------------------------------------------------------------
// MPAN

// mpanWeights are the weights of MPAN core digits 1..12 in the check-digit sum.
var mpanWeights = [12]int{3, 5, 7, 13, 17, 19, 23, 29, 31, 37, 41, 43}

// NormaliseMPAN strips all whitespace, requires exactly 13 ASCII digits and a valid check
// digit, and returns the 13-digit core.
func NormaliseMPAN(s string) (string, error) {
	core := strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return -1
		}
		return r
	}, s)
	if len(core) != 13 || !isASCIIDigits(core) {
		return "", newError("value_error", msgMPANLength)
	}
	if MPANCheckDigit(core[:12]) != int(core[12]-'0') {
		return "", newError("value_error", msgMPANCheckDigit)
	}
	return core, nil
}

// MPANCheckDigit returns the check digit for the first 12 digits of an MPAN core, or -1
// if first12 is not exactly 12 ASCII digits.
func MPANCheckDigit(first12 string) int {
	if len(first12) != 12 || !isASCIIDigits(first12) {
		return -1
	}
	sum := 0
	for i, w := range mpanWeights {
		sum += int(first12[i]-'0') * w
	}
	return sum % 11 % 10
}

func isASCIIDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------------------
// Postcode

// outwardRE is the outward code of the standard UK pattern (BS 7666): A9, A99, A9A, AA9,
// AA99 or AA9A, where the second letter of a two-letter area is never I, J or Z. It is a
// subset of the Site CRD pattern [A-Z]{1,2}[0-9][A-Z0-9]?.
var outwardRE = regexp.MustCompile(`^(?:[A-Z][0-9]{1,2}|[A-Z][A-HK-Y][0-9]{1,2}|[A-Z][0-9][A-Z]|[A-Z][A-HK-Y][0-9][A-Z])$`)

// inwardRE is the inward code: a sector digit and a two-letter unit.
var inwardRE = regexp.MustCompile(`^[0-9][A-Z]{2}$`)

// NormalisePostcode validates a UK postcode (case-insensitive, any amount of whitespace,
// including none, between outward and inward code; surrounding whitespace is ignored) and
// returns it upper case with exactly one space, e.g. "sw1a1aa" -> "SW1A 1AA".
// The special Girobank postcode "GIR 0AA" is accepted too.
func NormalisePostcode(s string) (string, error) {
	s = strings.TrimSpace(s)
	// The inward code is always the last three characters, so split there rather than
	// trusting the caller's spacing.
	if len(s) < 5 {
		return "", newError("value_error", msgPostcode)
	}
	outward := upperASCII(strings.TrimRightFunc(s[:len(s)-3], unicode.IsSpace))
	inward := upperASCII(s[len(s)-3:])
	if outward == "GIR" && inward == "0AA" {
		return "GIR 0AA", nil
	}
	if !outwardRE.MatchString(outward) || !inwardRE.MatchString(inward) {
		return "", newError("value_error", msgPostcode)
	}
	return outward + " " + inward, nil
}

// upperASCII upper-cases only a-z. strings.ToUpper would also fold letters such as
// U+017F (long s) into 'S', letting non-ASCII look-alikes pass as postcodes.
func upperASCII(s string) string {
	return strings.Map(func(r rune) rune {
		if 'a' <= r && r <= 'z' {
			return r - 'a' + 'A'
		}
		return r
	}, s)
}

// ---------------------------------------------------------------------------------------
// E-mail

// ValidateEmail checks that s (ignoring surrounding whitespace) is one syntactically valid
// bare address of at most 254 characters: no display name, comment or angle brackets, and
// a domain made of one or more hostname labels ("localhost" and "example.co.uk" both pass;
// domain literals such as "[192.0.2.1]" do not).
func ValidateEmail(s string) error {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 254 {
		return newError("value_error", msgEmail)
	}
	addr, err := mail.ParseAddress(s)
	// ParseAddress also accepts "Bob <bob@example.com>" and "bob@example.com (Bob)";
	// requiring the parsed address to equal the input rules those forms out.
	if err != nil || addr.Name != "" || addr.Address != s {
		return newError("value_error", msgEmail)
	}
	domain := s[strings.LastIndexByte(s, '@')+1:]
	for _, label := range strings.Split(domain, ".") {
		if !isHostLabel(label) {
			return newError("value_error", msgEmail)
		}
	}
	return nil
}

// isHostLabel reports whether label is a DNS label: 1-63 bytes of letters (Unicode letters
// allowed, for internationalised domains), digits and inner hyphens.
func isHostLabel(label string) bool {
	if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
		return false
	}
	for _, r := range label {
		if r != '-' && !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------------------
// Dates and timestamps

// timestampRE splits an ISO 8601 / RFC 3339 date-time. Seconds are optional (as in
// pydantic), and the zone is optional only so that a naive input can be told apart from
// garbage and reported as timezone_aware.
var timestampRE = regexp.MustCompile(
	`^(\d{4})-(\d{2})-(\d{2})` + // date
		`(?:[Tt ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?` + // time, fraction up to ns
		`([Zz]|[+-]\d{2}:\d{2})?)?$`) // zone

var dateRE = regexp.MustCompile(`^(\d{4})-(\d{2})-(\d{2})$`)

// ParseAwareTimestamp parses an ISO 8601 / RFC 3339 timestamp that must carry a zone
// offset (Z or ±HH:MM). Fractional seconds and a space instead of 'T' are accepted. The
// result keeps the input's offset.
//
// A well-formed timestamp (or bare date) without a zone fails with Type "timezone_aware";
// anything else unparsable fails with Type "datetime_parsing"; an instant outside the
// supported range (TimeInRange) "greater_than_equal" or "less_than_equal".
func ParseAwareTimestamp(s string) (time.Time, error) {
	m := timestampRE.FindStringSubmatch(s)
	if m == nil {
		reason := "invalid format, expected YYYY-MM-DDTHH:MM:SS[.f][Z|±HH:MM]"
		if len(s) < len("YYYY-MM-DD") {
			reason = "input is too short"
		}
		return time.Time{}, datetimeError(reason)
	}
	year, month, day := atoi(m[1]), atoi(m[2]), atoi(m[3])
	if reason := checkDate(year, month, day); reason != "" {
		return time.Time{}, datetimeError(reason)
	}
	hour, minute, sec := atoi(m[4]), atoi(m[5]), atoi(m[6]) // atoi("") == 0
	switch {
	case hour > 23:
		return time.Time{}, datetimeError("hour value is outside expected range of 0-23")
	case minute > 59:
		return time.Time{}, datetimeError("minute value is outside expected range of 0-59")
	case sec > 59:
		return time.Time{}, datetimeError("second value is outside expected range of 0-59")
	}
	nsec := 0
	if frac := m[7]; frac != "" {
		nsec = atoi(frac + strings.Repeat("0", 9-len(frac)))
	}
	zone := m[8]
	if zone == "" {
		// Validity first, awareness second, as pydantic does: "2026-13-01T00:00:00" is a
		// parsing error, "2026-01-15T10:30:00" a missing zone.
		return time.Time{}, newError("timezone_aware", "Input should have timezone info")
	}
	loc := time.UTC
	if zone != "Z" && zone != "z" {
		oh, om := atoi(zone[1:3]), atoi(zone[4:6])
		if oh > 23 || om > 59 {
			return time.Time{}, datetimeError("timezone offset must be less than 24 hours")
		}
		offset := oh*3600 + om*60
		if zone[0] == '-' {
			offset = -offset
		}
		loc = time.FixedZone("", offset)
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	// Stored in UTC (RFC 3339), a time must still have a four-digit year: 9999-12-31T23:59-01:00
	// is year 10000 in UTC, which no store of RFC 3339 accepts.
	if y := t.UTC().Year(); y < 1 || y > 9999 {
		return time.Time{}, datetimeError("year out of range once converted to UTC")
	}
	if err := TimeInRange(t); err != nil {
		return time.Time{}, err
	}
	return t, nil
}

func datetimeError(reason string) error {
	return newError("datetime_parsing", "Input should be a valid datetime, "+reason)
}

// ParseDate parses a strict YYYY-MM-DD calendar date (no time, no zone) and returns it at
// midnight UTC. Failures have Type "date_parsing"; a real date outside the supported range
// (DateInRange) "greater_than_equal" or "less_than_equal".
func ParseDate(s string) (time.Time, error) {
	m := dateRE.FindStringSubmatch(s)
	if m == nil {
		return time.Time{}, newError("date_parsing", msgDate)
	}
	year, month, day := atoi(m[1]), atoi(m[2]), atoi(m[3])
	if checkDate(year, month, day) != "" {
		return time.Time{}, newError("date_parsing", msgDate)
	}
	if err := DateInRange(year, time.Month(month), day); err != nil {
		return time.Time{}, err
	}
	return time.Date(year, time.Month(month), day, 0, 0, 0, 0, time.UTC), nil
}

// ValidateInstallationDate checks that s is a valid date (see ParseDate) that is not after
// today, where today is now's calendar date in UTC.
func ValidateInstallationDate(s string, now time.Time) error {
	d, err := ParseDate(s)
	if err != nil {
		return err
	}
	y, m, dd := now.UTC().Date()
	if d.After(time.Date(y, m, dd, 0, 0, 0, 0, time.UTC)) {
		return newError("value_error", "Date must not be in the future")
	}
	return nil
}

// checkDate returns why year-month-day is not a real calendar date, or "" if it is.
// Year 0 is refused because the Python side (datetime.MINYEAR == 1) cannot represent it.
func checkDate(year, month, day int) string {
	switch {
	case year < 1:
		return "year value is outside expected range of 1-9999"
	case month < 1 || month > 12:
		return "month value is outside expected range of 1-12"
	case day < 1 || day > daysIn(year, month):
		return "day value is outside expected range"
	}
	return ""
}

func daysIn(year, month int) int {
	// Day 0 of the next month is the last day of this one.
	return time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// atoi converts a string of ASCII digits already checked by a regexp; "" gives 0.
func atoi(s string) int {
	n := 0
	for i := 0; i < len(s); i++ {
		n = n*10 + int(s[i]-'0')
	}
	return n
}

// ---------------------------------------------------------------------------------------
// UUID

// IsUUID reports whether s is a canonical hyphenated UUID (8-4-4-4-12 hex digits, either
// case, any version or variant).
func IsUUID(s string) bool { return uuidProblem(s) == "" }

// ParseUUID returns s in lower-case canonical form if it is a canonical hyphenated UUID,
// and an Error of Type "uuid_parsing" otherwise.
func ParseUUID(s string) (string, error) {
	if reason := uuidProblem(s); reason != "" {
		return "", newError("uuid_parsing", "Input should be a valid UUID, "+reason)
	}
	return strings.ToLower(s), nil
}

// uuidProblem returns why s is not a canonical hyphenated UUID, or "" if it is.
func uuidProblem(s string) string {
	if len(s) != 36 {
		return fmt.Sprintf("invalid length: expected 36 characters, found %d", len(s))
	}
	for i := 0; i < len(s); i++ {
		c, want := s[i], "[0-9a-fA-F]"
		ok := '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
		if i == 8 || i == 13 || i == 18 || i == 23 {
			ok, want = c == '-', "`-`"
		}
		if !ok {
			r, _ := utf8.DecodeRuneInString(s[i:]) // show the whole character, not one byte
			return fmt.Sprintf("invalid character: expected %s, found %q at %d", want, r, i+1)
		}
	}
	return ""
}
