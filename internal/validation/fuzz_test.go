package validation

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// fuzzErr fails t unless err is an *Error whose Type is one of types.
func fuzzErr(t *testing.T, in string, err error, types ...string) {
	t.Helper()
	var ve *Error
	if !errors.As(err, &ve) {
		t.Fatalf("%q: error %#v is not an *Error", in, err)
	}
	for _, typ := range types {
		if ve.Type == typ {
			return
		}
	}
	t.Fatalf("%q: unexpected error type %q (msg %q)", in, ve.Type, ve.Msg)
}

func FuzzNormaliseMPAN(f *testing.F) {
	for _, s := range []string{
		"1200000000011", "2301234567894", "1012345678903", "1234567890126",
		"1234567890123", "12 0000 0000 011", "\t1200000000011\n", "1200\u00a0000000011",
		"", "120000000001", "12000000000a1", "١٢٠٠٠٠٠٠٠٠٠١١",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := NormaliseMPAN(in)
		if err != nil {
			fuzzErr(t, in, err, "value_error")
			return
		}
		if len(out) != 13 || !isASCIIDigits(out) {
			t.Fatalf("%q: normalised to %q, not 13 digits", in, out)
		}
		if MPANCheckDigit(out[:12]) != int(out[12]-'0') {
			t.Fatalf("%q: accepted %q with a bad check digit", in, out)
		}
		if again, err := NormaliseMPAN(out); err != nil || again != out {
			t.Fatalf("%q: %q re-normalises to %q, %v", in, out, again, err)
		}
	})
}

func FuzzNormalisePostcode(f *testing.F) {
	for _, s := range []string{
		"SW1A 1AA", "sw1a1aa", "  sw1a   1aa  ", "ec1a\t1bb", "M1 1AE", "B33 8TH", "W1A 0AX",
		"CR2 6XH", "DN55 1PT", "GIR 0AA", "gir0aa", "", "SW1A", "S W1A 1AA", "AI1 1AA",
		"\u017fw1a 1aa", "SW1A 1\u212aA",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := NormalisePostcode(in)
		if err != nil {
			fuzzErr(t, in, err, "value_error")
			return
		}
		if len(out) < 6 || len(out) > 8 || strings.Count(out, " ") != 1 || out != strings.ToUpper(out) {
			t.Fatalf("%q: badly normalised to %q", in, out)
		}
		// Must satisfy the Site CRD pattern too (GIR 0AA is the one documented exception).
		outward, inward, _ := strings.Cut(out, " ")
		if out != "GIR 0AA" && (!outwardRE.MatchString(outward) || !inwardRE.MatchString(inward)) {
			t.Fatalf("%q: normalised to %q outside the pattern", in, out)
		}
		for _, variant := range []string{out, strings.ToLower(out), outward + inward, " " + outward + "\t\t" + inward + " "} {
			if again, err := NormalisePostcode(variant); err != nil || again != out {
				t.Fatalf("%q: variant %q of %q normalises to %q, %v", in, variant, out, again, err)
			}
		}
	})
}

func FuzzParseAwareTimestamp(f *testing.F) {
	for _, s := range []string{
		"2026-01-15T10:30:00Z", "2026-01-15T10:30:00+01:00", "2026-01-15T10:30:00.123Z",
		"2026-01-15 10:30:00-05:30", "2026-01-15T10:30Z", "2024-02-29T23:59:59.999999999+14:00",
		"2026-01-15T10:30:00", "2026-01-15", "2026-13-01T00:00:00Z", "", "2026-01-15T10:30:00+24:00",
		"0000-01-01T00:00:00Z",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := ParseAwareTimestamp(in)
		if err != nil {
			fuzzErr(t, in, err, "timezone_aware", "datetime_parsing")
			if !got.IsZero() {
				t.Fatalf("%q: non-zero time %v alongside an error", in, got)
			}
			return
		}
		// An accepted timestamp carries an explicit zone designator at its end.
		last := in[len(in)-1]
		hasZone := last == 'Z' || last == 'z' || len(in) >= 6 && (in[len(in)-6] == '+' || in[len(in)-6] == '-') && in[len(in)-3] == ':'
		if !hasZone {
			t.Fatalf("%q: accepted without a zone", in)
		}
		// Formatting as RFC 3339 and parsing again gives the same instant and offset.
		again, err := ParseAwareTimestamp(got.Format(time.RFC3339Nano))
		_, off1 := got.Zone()
		_, off2 := again.Zone()
		if err != nil || !again.Equal(got) || off1 != off2 {
			t.Fatalf("%q: round trip of %v gave %v, %v", in, got, again, err)
		}
		if std, err := time.Parse(time.RFC3339Nano, got.Format(time.RFC3339Nano)); err != nil || !std.Equal(got) {
			t.Fatalf("%q: %v does not round-trip through the standard library: %v", in, got, err)
		}
	})
}

func FuzzValidateEmail(f *testing.F) {
	for _, s := range []string{
		"alice@example.com", "  alice@example.com\n", "a.b+tag@sub.example.co.uk", "user@localhost",
		"Bob <bob@example.com>", "bob@example.com (Bob)", "bob@example..com", "bob@[192.0.2.1]",
		"", "@", "a@b@c", "\"a b\"@example.com", "ünï@exämple.com",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		err := ValidateEmail(in)
		if err != nil {
			fuzzErr(t, in, err, "value_error")
			return
		}
		trimmed := strings.TrimSpace(in)
		if len(trimmed) > 254 || !strings.Contains(trimmed, "@") || strings.ContainsAny(trimmed, "<>\r\n") {
			t.Fatalf("%q: accepted", in)
		}
		if err := ValidateEmail(trimmed); err != nil {
			t.Fatalf("%q: trimmed form rejected: %v", in, err)
		}
	})
}

func FuzzParseUUID(f *testing.F) {
	for _, s := range []string{
		"123e4567-e89b-12d3-a456-426614174000", "123E4567-E89B-12D3-A456-426614174000",
		"00000000-0000-0000-0000-000000000000", "123e4567e89b12d3a456426614174000",
		"{123e4567-e89b-12d3-a456-426614174000}", "", "123e4567-e89b-12d3-a456-4266141740é",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, err := ParseUUID(in)
		if IsUUID(in) != (err == nil) {
			t.Fatalf("%q: IsUUID disagrees with ParseUUID (%v)", in, err)
		}
		if err != nil {
			fuzzErr(t, in, err, "uuid_parsing")
			return
		}
		if len(out) != 36 || out != strings.ToLower(out) || !strings.EqualFold(out, in) {
			t.Fatalf("%q: parsed to %q", in, out)
		}
		if again, err := ParseUUID(strings.ToUpper(out)); err != nil || again != out {
			t.Fatalf("%q: upper-case %q parses to %q, %v", in, out, again, err)
		}
	})
}
