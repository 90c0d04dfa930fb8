package validation

import "testing"

func TestBankDetails(t *testing.T) {
	for _, tc := range []struct {
		fn      func(string) (string, error)
		in, out string
		ok      bool
	}{
		{NormaliseSortCode, "12-34-56", "12-34-56", true},
		{NormaliseSortCode, " 123456 ", "12-34-56", true},
		{NormaliseSortCode, "12 34 56", "12-34-56", true},
		{NormaliseSortCode, "12345", "", false},
		{NormaliseSortCode, "12-34-5a", "", false},
		{NormaliseSortCode, "١٢٣٤٥٦", "", false},
		{NormaliseAccountNumber, "12345678", "12345678", true},
		{NormaliseAccountNumber, "1234 5678", "12345678", true},
		{NormaliseAccountNumber, "1234567", "", false},
		{NormaliseAccountNumber, "123456789", "", false},
		{NormaliseAccountName, "  Ada Lovelace ", "Ada Lovelace", true},
		{NormaliseAccountName, "   ", "", false},
		{NormaliseAccountName, "Ada\x00", "", false},
	} {
		got, err := tc.fn(tc.in)
		if (err == nil) != tc.ok || got != tc.out {
			t.Errorf("%q: %q, %v", tc.in, got, err)
		}
	}
	for in, want := range map[string]string{"12345678": "****5678", "12-34-56": "****3456", "123": "***", "": ""} {
		if got := MaskDigits(in); got != want {
			t.Errorf("MaskDigits(%q) = %q, want %q", in, got, want)
		}
	}
}
