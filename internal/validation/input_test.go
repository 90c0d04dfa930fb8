package validation

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestSingleLineText(t *testing.T) {
	for _, c := range []struct {
		in, wantType, wantIn string
	}{
		{"1 Test Street", "", ""},
		{"Flat 2, 10 Rue de l'Église", "", ""},
		{"Ünïcödé ✓ 東京", "", ""},
		{"", "", ""},
		{"1 Test\u0000\u0007\u001b[31mStreet", "value_error", "found U+0000 at character 7"},
		{"cu\x00x", "value_error", "found U+0000 at character 3"}, // external_user_id=cu%00x
		{"bell\a", "value_error", "U+0007"},
		{"\x1b[31mred", "value_error", "U+001B at character 1"},
		{"tab\there", "value_error", "U+0009"},
		{"two\nlines", "value_error", "U+000A"},
		{"cr\rlf", "value_error", "U+000D"},
		{"del\x7f", "value_error", "U+007F"},
		{"c1 \u0085 next line", "value_error", "U+0085"},
		{"c1 \u009b csi", "value_error", "U+009B"},
		{"line\u2028separator", "value_error", "U+2028"},
		{"para\u2029separator", "value_error", "U+2029"},
		{"bad utf-8 \xff", "value_error", "valid UTF-8"},
		{"\u00a0non-breaking space is text", "", ""},
	} {
		err := SingleLineText(c.in)
		ve := checkErr(t, err, c.wantType)
		if ve != nil && !strings.Contains(ve.Msg, c.wantIn) {
			t.Errorf("SingleLineText(%q): %q does not contain %q", c.in, ve.Msg, c.wantIn)
		}
		if ve != nil && !strings.HasPrefix(ve.Msg, "String should") {
			t.Errorf("SingleLineText(%q): %q", c.in, ve.Msg)
		}
	}
	// Every C0 and C1 control is refused; the first printable characters around them are not.
	for r := rune(0); r <= 0xa0; r++ {
		refused := SingleLineText("a"+string(r)+"b") != nil
		if want := r <= 0x1f || (r >= 0x7f && r <= 0x9f); refused != want {
			t.Errorf("U+%04X: refused %v, want %v", r, refused, want)
		}
	}
}

func TestFiniteNumber(t *testing.T) {
	for _, x := range []float64{0, -1, 7.4, math.MaxFloat64, math.SmallestNonzeroFloat64} {
		noErr(t, FiniteNumber(x))
	}
	for _, x := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		ve := checkErr(t, FiniteNumber(x), "finite_number")
		if ve.Msg != "Input should be a finite number" {
			t.Errorf("FiniteNumber(%v): %q", x, ve.Msg)
		}
	}
}

func TestParseNumber(t *testing.T) {
	for _, c := range []struct {
		in       string
		want     float64
		wantType string
	}{
		{"7.4", 7.4, ""},
		{" 7.4 ", 7.4, ""},
		{"7", 7, ""},
		{"7.", 7, ""},
		{".5", 0.5, ""},
		{"+3", 3, ""},
		{"-0", 0, ""},
		{"1e3", 1000, ""},
		{"2.5E-1", 0.25, ""},
		// Non-finite spellings strconv.ParseFloat takes: the hosted flow's 500.
		{"NaN", 0, "float_type"},
		{"nan", 0, "float_type"},
		{"Inf", 0, "float_type"},
		{"+Inf", 0, "float_type"},
		{"-Inf", 0, "float_type"},
		{"Infinity", 0, "float_type"},
		{"infinity", 0, "float_type"},
		{"-infinity", 0, "float_type"},
		// Other spellings that are not a decimal number.
		{"7,4", 0, "float_type"},
		{"0x1p3", 0, "float_type"},
		{"1_000", 0, "float_type"},
		{"", 0, "float_type"},
		{".", 0, "float_type"},
		{"e5", 0, "float_type"},
		{"7.4kW", 0, "float_type"},
		// A decimal number beyond float64.
		{"1e309", 0, "finite_number"},
		{"-1e309", 0, "finite_number"},
	} {
		got, err := ParseNumber(c.in)
		_ = checkErr(t, err, c.wantType)
		if c.wantType == "" && got != c.want {
			t.Errorf("ParseNumber(%q) = %v, want %v", c.in, got, c.want)
		}
		if c.wantType != "" && got != 0 {
			t.Errorf("ParseNumber(%q) = %v with an error", c.in, got)
		}
	}
}

func TestConsentTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		in, wantType string
	}{
		{"2026-03-01T12:00:00Z", ""},
		{"2026-03-01T11:59:59Z", ""},
		{"2020-01-01T00:00:00+01:00", ""},
		{"2026-03-01T12:04:59Z", ""}, // a client clock a little ahead
		{"2026-03-01T12:05:01Z", "value_error"},
		{"2026-03-02T00:00:00Z", "value_error"},
		{"2026-03-01T13:00:00+00:30", "value_error"},
		{"9999-12-31T23:59:59Z", "value_error"},
		{"9999-12-31T23:59:59-01:00", "datetime_parsing"}, // year 10000 in UTC: not a time at all
		{"2026-03-01T12:00:00", "timezone_aware"},
		{"not a time", "datetime_parsing"},
	} {
		_, err := ParseConsentTime(c.in, now)
		ve := checkErr(t, err, c.wantType)
		if ve != nil && ve.Type == "value_error" && ve.Msg != "Consent time must not be in the future" {
			t.Errorf("ParseConsentTime(%q): %q", c.in, ve.Msg)
		}
	}
	// The same message style as a future installation date.
	ve := checkErr(t, ValidateInstallationDate("2026-03-02", now), "value_error")
	cv := checkErr(t, ValidateConsentTime(now.Add(time.Hour), now), "value_error")
	if !strings.HasSuffix(ve.Msg, "must not be in the future") || !strings.HasSuffix(cv.Msg, "must not be in the future") {
		t.Errorf("messages differ in style: %q / %q", ve.Msg, cv.Msg)
	}
}
