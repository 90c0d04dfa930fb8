package validation

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// checkErr fails t unless err is nil (wantType == "") or an *Error of type wantType.
func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("unexpected error: %v", err)
	}
}

func checkErr(t *testing.T, err error, wantType string) *Error {
	t.Helper()
	if wantType == "" {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		return nil
	}
	var ve *Error
	if !errors.As(err, &ve) {
		t.Fatalf("want *Error of type %q, got %#v", wantType, err)
	}
	if ve.Type != wantType {
		t.Fatalf("want type %q, got %q (msg %q)", wantType, ve.Type, ve.Msg)
	}
	if ve.Error() != ve.Msg || ve.Msg == "" {
		t.Fatalf("Error() = %q, Msg = %q", ve.Error(), ve.Msg)
	}
	return ve
}

func TestMPANCheckDigit(t *testing.T) {
	tests := []struct {
		in   string
		want int
	}{
		{"120000000001", 1},
		{"230123456789", 4},
		{"101234567890", 3},
		{"123456789012", 6}, // so 1234567890123 is invalid and ...126 valid
		{"000000000000", 0},
		{"", -1},
		{"12345678901", -1},
		{"1234567890123", -1},
		{"12345678901a", -1},
		{"12345678901 ", -1},
		{"１２３４５６７８９０１２", -1}, // full-width digits
	}
	for _, tt := range tests {
		if got := MPANCheckDigit(tt.in); got != tt.want {
			t.Errorf("MPANCheckDigit(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}

func TestNormaliseMPAN(t *testing.T) {
	tests := []struct {
		name, in, want, wantMsg string
	}{
		{"fixture 12", "1200000000011", "1200000000011", ""},
		{"fixture 23", "2301234567894", "2301234567894", ""},
		{"fixture 10", "1012345678903", "1012345678903", ""},
		{"fixture 12345", "1234567890126", "1234567890126", ""},
		{"grouped with spaces", "12 0000 0000 011", "1200000000011", ""},
		{"surrounding whitespace", "\t 2301234567894\n", "2301234567894", ""},
		{"non-breaking space", "1200\u00a0000000011", "1200000000011", ""},
		{"bad check digit", "1234567890123", "", msgMPANCheckDigit},
		{"bad check digit 2", "1200000000012", "", msgMPANCheckDigit},
		{"empty", "", "", msgMPANLength},
		{"only spaces", "   ", "", msgMPANLength},
		{"12 digits", "120000000001", "", msgMPANLength},
		{"14 digits", "12000000000110", "", msgMPANLength},
		{"letter", "12000000000a1", "", msgMPANLength},
		{"hyphens", "1200-0000-0011", "", msgMPANLength},
		{"plus sign", "+120000000001", "", msgMPANLength},
		{"arabic-indic digits", "١٢٠٠٠٠٠٠٠٠٠١١", "", msgMPANLength},
		{"full 21-digit MPAN", "011234561200000000011", "", msgMPANLength},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := NormaliseMPAN(tt.in)
			if tt.wantMsg == "" {
				noErr(t, err)
				if got != tt.want {
					t.Fatalf("got %q, want %q", got, tt.want)
				}
				return
			}
			if ve := checkErr(t, err, "value_error"); ve.Msg != tt.wantMsg {
				t.Fatalf("msg %q, want %q", ve.Msg, tt.wantMsg)
			}
			if got != "" {
				t.Fatalf("got %q alongside an error", got)
			}
		})
	}
}

func TestNormalisePostcode(t *testing.T) {
	tests := []struct {
		in, want string // want "" means invalid
	}{
		{"SW1A 1AA", "SW1A 1AA"},
		{"sw1a1aa", "SW1A 1AA"},
		{"Sw1A 1aA", "SW1A 1AA"},
		{"  sw1a   1aa  ", "SW1A 1AA"},
		{"ec1a\t1bb", "EC1A 1BB"},
		{"M1 1AE", "M1 1AE"},     // A9
		{"B33 8TH", "B33 8TH"},   // A99
		{"W1A 0AX", "W1A 0AX"},   // A9A
		{"CR2 6XH", "CR2 6XH"},   // AA9
		{"DN55 1PT", "DN55 1PT"}, // AA99
		{"EC1A 1BB", "EC1A 1BB"}, // AA9A
		{"ze1 0aa", "ZE1 0AA"},
		{"GIR 0AA", "GIR 0AA"},
		{"gir0aa", "GIR 0AA"},
		{"", ""},
		{"   ", ""},
		{"SW1A", ""},
		{"1AA", ""},
		{"A 1AA", ""},
		{"SW1A 1A", ""},
		{"SW1A 1AAA", ""},
		{"SW1AA 1AA", ""},
		{"SWA1 1AA", ""},
		{"99 1AA", ""},
		{"SW1A 1A1", ""},
		{"SW1A AAA", ""},
		{"S W1A 1AA", ""},
		{"SW1A-1AA", ""},
		{"AI1 1AA", ""}, // second letter never I, J or Z
		{"AJ1 1AA", ""},
		{"AZ1 1AA", ""},
		{"GIR 1AA", ""},
		{"\u017fw1a 1aa", ""}, // long s, which strings.ToUpper folds to 'S'
		{"SW1A 1\u212aA", ""}, // Kelvin sign
		{"SW1A 1ÅA", ""},
	}
	for _, tt := range tests {
		got, err := NormalisePostcode(tt.in)
		if tt.want == "" {
			if ve := checkErr(t, err, "value_error"); ve.Msg != msgPostcode {
				t.Errorf("NormalisePostcode(%q) msg %q", tt.in, ve.Msg)
			}
			continue
		}
		noErr(t, err)
		if got != tt.want {
			t.Errorf("NormalisePostcode(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestValidateEmail(t *testing.T) {
	tests := []struct {
		in    string
		valid bool
	}{
		{"alice@example.com", true},
		{"  alice@example.com\n", true},
		{"a.b+tag@sub.example.co.uk", true},
		{"o'brien@example.ie", true},
		{"user@localhost", true}, // dot-free domain
		{"x@xn--bcher-kva.example", true},
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 57), true}, // 249
		{"", false},
		{"   ", false},
		{"alice", false},
		{"alice@", false},
		{"@example.com", false},
		{"Bob <bob@example.com>", false},
		{"<bob@example.com>", false},
		{"bob@example.com (Bob)", false},
		{"bob@example..com", false},
		{".bob@example.com", false},
		{"bob@example.com.", false},
		{"bob@-example.com", false},
		{"bob@example-.com", false},
		{"bob@exa_mple.com", false},
		{"bob@[192.0.2.1]", false},
		{"bob@exa mple.com", false},
		{"a@b@example.com", false},
		{"bob@example.com, carol@example.com", false},
		{"bob@" + strings.Repeat("b", 64) + ".com", false}, // label longer than 63
		{strings.Repeat("a", 64) + "@" + strings.Repeat("b", 63) + "." + strings.Repeat("c", 63) + "." + strings.Repeat("d", 63), false}, // 255
	}
	for _, tt := range tests {
		err := ValidateEmail(tt.in)
		if tt.valid {
			if err != nil {
				t.Errorf("ValidateEmail(%q) = %v, want nil", tt.in, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("ValidateEmail(%q) = nil, want error", tt.in)
			continue
		}
		if ve := checkErr(t, err, "value_error"); ve.Msg != msgEmail {
			t.Errorf("ValidateEmail(%q) msg %q", tt.in, ve.Msg)
		}
	}
}

func TestParseAwareTimestamp(t *testing.T) {
	plus1 := time.FixedZone("", 3600)
	minus530 := time.FixedZone("", -(5*3600 + 30*60))
	tests := []struct {
		in       string
		want     time.Time // compared with Equal and for offset
		wantType string
	}{
		{"2026-01-15T10:30:00Z", time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC), ""},
		{"2026-01-15T10:30:00+01:00", time.Date(2026, 1, 15, 10, 30, 0, 0, plus1), ""},
		{"2026-01-15T10:30:00.123Z", time.Date(2026, 1, 15, 10, 30, 0, 123e6, time.UTC), ""},
		{"2026-01-15T10:30:00.123456789-05:30", time.Date(2026, 1, 15, 10, 30, 0, 123456789, minus530), ""},
		{"2026-01-15 10:30:00Z", time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC), ""},
		{"2026-01-15t10:30:00z", time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC), ""},
		{"2026-01-15T10:30Z", time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC), ""},
		{"2026-01-15T10:30:00-00:00", time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC), ""},
		{"2024-02-29T23:59:59+14:00", time.Date(2024, 2, 29, 23, 59, 59, 0, time.FixedZone("", 14*3600)), ""},

		{"9999-12-31T23:59:59Z", time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC), ""},
		{"9999-12-31T23:59:59-01:00", time.Time{}, "datetime_parsing"}, // year 10000 in UTC
		{"0001-01-01T00:30:00+01:00", time.Time{}, "datetime_parsing"}, // year 0 in UTC

		{"2026-01-15T10:30:00", time.Time{}, "timezone_aware"},
		{"2026-01-15 10:30:00.5", time.Time{}, "timezone_aware"},
		{"2026-01-15", time.Time{}, "timezone_aware"}, // a date is a naive midnight, as in pydantic

		{"", time.Time{}, "datetime_parsing"},
		{"2026-13-01T00:00:00Z", time.Time{}, "datetime_parsing"},
		{"2026-13-01T00:00:00", time.Time{}, "datetime_parsing"}, // invalid beats naive
		{"2025-02-29T00:00:00Z", time.Time{}, "datetime_parsing"},
		{"2026-04-31T00:00:00Z", time.Time{}, "datetime_parsing"},
		{"0000-01-01T00:00:00Z", time.Time{}, "datetime_parsing"},
		{"2026-01-15T24:00:00Z", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:60:00Z", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:30:60Z", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:30:00+24:00", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:30:00+01:60", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:30:00+0100", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:30:00 Z", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:30:00.Z", time.Time{}, "datetime_parsing"},
		{"2026-01-15T10:30:00.1234567890Z", time.Time{}, "datetime_parsing"},
		{"2026-1-15T10:30:00Z", time.Time{}, "datetime_parsing"},
		{" 2026-01-15T10:30:00Z", time.Time{}, "datetime_parsing"},
		{"1736937000", time.Time{}, "datetime_parsing"},
		{"yesterday", time.Time{}, "datetime_parsing"},
		{"2026-01-15Z", time.Time{}, "datetime_parsing"},
	}
	for _, tt := range tests {
		got, err := ParseAwareTimestamp(tt.in)
		if tt.wantType != "" {
			ve := checkErr(t, err, tt.wantType)
			switch tt.wantType {
			case "timezone_aware":
				if ve.Msg != "Input should have timezone info" {
					t.Errorf("%q: msg %q", tt.in, ve.Msg)
				}
			case "datetime_parsing":
				if !strings.HasPrefix(ve.Msg, "Input should be a valid datetime, ") {
					t.Errorf("%q: msg %q", tt.in, ve.Msg)
				}
			}
			if !got.IsZero() {
				t.Errorf("%q: got %v alongside an error", tt.in, got)
			}
			continue
		}
		noErr(t, err)
		_, gotOff := got.Zone()
		_, wantOff := tt.want.Zone()
		if !got.Equal(tt.want) || gotOff != wantOff {
			t.Errorf("ParseAwareTimestamp(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseDate(t *testing.T) {
	tests := []struct {
		in    string
		valid bool
	}{
		{"2026-01-15", true},
		{"2024-02-29", true}, // leap year
		{"2000-02-29", true}, // divisible by 400
		{"2026-12-31", true},
		{"1900-01-01", true},
		{"2025-02-29", false}, // not a leap year
		{"1900-02-29", false}, // divisible by 100, not 400
		{"2026-02-30", false},
		{"2026-04-31", false},
		{"2026-00-10", false},
		{"2026-13-01", false},
		{"2026-01-00", false},
		{"2026-01-32", false},
		{"0000-01-01", false},
		{"2026-1-5", false},
		{"20260115", false},
		{"2026/01/15", false},
		{"2026-01-15T00:00:00", false},
		{"2026-01-15T00:00:00Z", false},
		{" 2026-01-15", false},
		{"2026-01-15\n", false},
		{"", false},
	}
	for _, tt := range tests {
		got, err := ParseDate(tt.in)
		if !tt.valid {
			if ve := checkErr(t, err, "date_parsing"); ve.Msg != msgDate {
				t.Errorf("ParseDate(%q) msg %q", tt.in, ve.Msg)
			}
			continue
		}
		noErr(t, err)
		if s := got.Format(time.DateOnly); s != tt.in || got.Location() != time.UTC || got.Hour() != 0 {
			t.Errorf("ParseDate(%q) = %v", tt.in, got)
		}
	}
}

func TestValidateInstallationDate(t *testing.T) {
	// 23:30 in New York on the 15th is already the 16th in UTC.
	lateWest := time.Date(2026, 1, 15, 23, 30, 0, 0, time.FixedZone("EST", -5*3600))
	// 00:30 in Paris on the 15th is still the 14th in UTC.
	earlyEast := time.Date(2026, 1, 15, 0, 30, 0, 0, time.FixedZone("CET", 3600))
	tests := []struct {
		in       string
		now      time.Time
		wantType string
	}{
		{"2026-01-15", lateWest, ""},
		{"2026-01-16", lateWest, ""}, // today in UTC
		{"2026-01-17", lateWest, "value_error"},
		{"2026-01-14", earlyEast, ""},
		{"2026-01-15", earlyEast, "value_error"},
		{"2020-06-01", earlyEast, ""},
		{"2024-02-29", lateWest, ""},
		{"2028-02-29", lateWest, "value_error"},
		{"2026-02-29", lateWest, "date_parsing"}, // invalid wins over future
		{"", lateWest, "date_parsing"},
		{"15/01/2026", lateWest, "date_parsing"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ve := checkErr(t, ValidateInstallationDate(tt.in, tt.now), tt.wantType)
			if tt.wantType == "value_error" && ve.Msg != "Date must not be in the future" {
				t.Errorf("msg %q", ve.Msg)
			}
		})
	}
}

func TestParseUUID(t *testing.T) {
	tests := []struct {
		in, want string // want "" means invalid
	}{
		{"123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
		{"123E4567-E89B-12D3-A456-426614174000", "123e4567-e89b-12d3-a456-426614174000"},
		{"00000000-0000-0000-0000-000000000000", "00000000-0000-0000-0000-000000000000"},
		{"ffffffff-ffff-ffff-ffff-ffffffffffff", "ffffffff-ffff-ffff-ffff-ffffffffffff"},
		{"01890a5d-ac96-774b-bcce-b302099a8057", "01890a5d-ac96-774b-bcce-b302099a8057"}, // v7
		{"", ""},
		{"123e4567e89b12d3a456426614174000", ""},
		{"{123e4567-e89b-12d3-a456-426614174000}", ""},
		{"urn:uuid:123e4567-e89b-12d3-a456-426614174000", ""},
		{"123e4567-e89b-12d3-a456-42661417400g", ""},
		{"123e4567_e89b-12d3-a456-426614174000", ""},
		{"123e4567e-89b-12d3-a456-426614174000", ""},
		{" 123e4567-e89b-12d3-a456-42661417400", ""},
		{"123e4567-e89b-12d3-a456-4266141740000", ""},
		{"123e4567-e89b-12d3-a456-42661417400é", ""}, // 37 bytes
		{"123e4567-e89b-12d3-a456-4266141740é", ""},  // 36 bytes, non-ASCII
	}
	for _, tt := range tests {
		got, err := ParseUUID(tt.in)
		if IsUUID(tt.in) != (tt.want != "") {
			t.Errorf("IsUUID(%q) = %v", tt.in, IsUUID(tt.in))
		}
		if tt.want == "" {
			if ve := checkErr(t, err, "uuid_parsing"); !strings.HasPrefix(ve.Msg, "Input should be a valid UUID, ") {
				t.Errorf("ParseUUID(%q) msg %q", tt.in, ve.Msg)
			}
			continue
		}
		noErr(t, err)
		if got != tt.want {
			t.Errorf("ParseUUID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
