package hostedflow

import (
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/meters"
)

func TestMetersFound(t *testing.T) {
	for _, c := range []struct {
		n    int
		full bool
		want string
	}{
		{0, false, "No addresses found at SW1A 1AA: check the postcode or enter your MPAN."},
		{1, false, "1 address found at SW1A 1AA."},
		{12, false, "12 addresses found at SW1A 1AA."},
		{meters.MaxSearchResults, true, "The first 50 addresses at SW1A 1AA: add your house number or name to find yours."},
	} {
		if got := MetersFound(c.n, "SW1A 1AA", c.full); got != c.want {
			t.Errorf("MetersFound(%d, %v) = %q, want %q", c.n, c.full, got, c.want)
		}
	}
}

// The household is shown its MPAN masked but for the last four digits, and nothing when it has none.
func TestHouseholdSiteMasksTheMPAN(t *testing.T) {
	household := &auth.Principal{Kind: auth.KindEndUser}
	got := householdSite(household, "SW1A 1AA", "10 Downing Street", "1200000000011", nil)
	if got.MPANMasked != "•••••••••0011" || strings.Contains(got.MPANMasked, "12000") {
		t.Errorf("masked MPAN %q", got.MPANMasked)
	}
	if none := householdSite(household, "SW1A 1AA", "", "", nil); none.MPANMasked != "" {
		t.Errorf("a site without an MPAN shows %q", none.MPANMasked)
	}
}
