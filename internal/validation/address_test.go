package validation_test

import (
	"testing"

	"github.com/flexsite/flexsite/internal/validation"
)

func TestAddressKey(t *testing.T) {
	base := validation.AddressKey("12 High Street", "SW1A 1AA")
	for _, tc := range []struct {
		name             string
		street, postcode string
		same, emptyKeyed bool
	}{
		{name: "as stored", street: "12 High Street", postcode: "SW1A 1AA", same: true},
		{name: "case", street: "12 HIGH street", postcode: "SW1A 1AA", same: true},
		{name: "punctuation", street: "12, High Street.", postcode: "SW1A 1AA", same: true},
		{name: "extra spaces", street: "  12   High\u00a0Street ", postcode: "SW1A 1AA", same: true},
		{name: "postcode without space", street: "12 High Street", postcode: "sw1a1aa", same: true},
		{name: "hyphens and slashes", street: "12-High/Street", postcode: "SW1A 1AA", same: true},
		{name: "abbreviation is another word", street: "12 High St", postcode: "SW1A 1AA"},
		{name: "another number", street: "14 High Street", postcode: "SW1A 1AA"},
		{name: "a letter joined to the number", street: "12A High Street", postcode: "SW1A 1AA"},
		{name: "another postcode", street: "12 High Street", postcode: "SW1A 2AA"},
		{name: "no street address", street: "", postcode: "SW1A 1AA", emptyKeyed: true},
		{name: "punctuation only", street: " ,. ", postcode: "SW1A 1AA", emptyKeyed: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := validation.AddressKey(tc.street, tc.postcode)
			switch {
			case tc.emptyKeyed && got != "":
				t.Fatalf("AddressKey(%q, %q) = %q, want no key", tc.street, tc.postcode, got)
			case tc.emptyKeyed:
			case tc.same && got != base:
				t.Fatalf("AddressKey(%q, %q) = %q, want %q", tc.street, tc.postcode, got, base)
			case !tc.same && got == base:
				t.Fatalf("AddressKey(%q, %q) = %q: the same address as %q", tc.street, tc.postcode, got, base)
			}
		})
	}
	if want := "SW1A1AA|12 high street"; base != want {
		t.Fatalf("AddressKey = %q, want %q", base, want)
	}
	// Letters beyond ASCII count as letters, folded to lower case.
	if a, b := validation.AddressKey("Ty Ŵyn", "CF10 1AA"), validation.AddressKey("TY ŵYN", "CF10 1AA"); a != b {
		t.Fatalf("%q != %q", a, b)
	}
}
