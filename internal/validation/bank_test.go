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

// FuzzBankDetails: whatever a household types, an accepted sort code is NN-NN-NN and an
// accepted account number 8 digits, both normalise to themselves, and the mask never shows
// more than the last four digits.
func FuzzBankDetails(f *testing.F) {
	for _, s := range []string{"12-34-56", "123456", "1234 5678", "١٢٣٤٥٦", "12--34--56", " ", "Ada Lovelace", "\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if sc, err := NormaliseSortCode(s); err == nil {
			if len(sc) != 8 || sc[2] != '-' || sc[5] != '-' || !isASCIIDigits(sc[0:2]+sc[3:5]+sc[6:8]) {
				t.Fatalf("sort code %q from %q", sc, s)
			}
			if again, err := NormaliseSortCode(sc); err != nil || again != sc {
				t.Fatalf("sort code %q does not normalise to itself", sc)
			}
		}
		if n, err := NormaliseAccountNumber(s); err == nil {
			if len(n) != 8 || !isASCIIDigits(n) {
				t.Fatalf("account number %q from %q", n, s)
			}
			if m := MaskDigits(n); m != "****"+n[4:] {
				t.Fatalf("mask %q of %q", m, n)
			}
		}
		if name, err := NormaliseAccountName(s); err == nil && (name == "" || len([]rune(name)) > MaxAccountNameLength) {
			t.Fatalf("account name %q from %q", name, s)
		}
	})
}
