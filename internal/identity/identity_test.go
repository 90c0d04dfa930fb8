package identity

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestNamesAreValidObjectNames(t *testing.T) {
	long := strings.Repeat("x", 300)
	names := map[string]string{
		"site for mpan":          SiteNameForMPAN("1200000000011"),
		"site for external user": SiteNameForExternalUser("User 42 <weird>"),
		"asset plain":            AssetName("charger-001"),
		"asset with spaces":      AssetName("  My Charger #1  "),
		"asset all symbols":      AssetName("!!!___"),
		"asset long":             AssetName(long),
		"asset unicode":          AssetName("wärmepumpe-ü"),
		"enrolment":              EnrolmentName("mpan-1200000000011", flexv1.PropositionFullAssetScheduleControl),
		"enrolment long site":    EnrolmentName(long[:253], flexv1.PropositionLimitedPause),
		"username claim":         UsernameClaimName("Acme_App@example.com"),
		"username claim long":    UsernameClaimName(long[:128]),
	}
	for what, name := range names {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("%s: %q is not a valid object name: %v", what, name, errs)
		}
	}
}

func TestNamesAreDeterministicAndDistinct(t *testing.T) {
	if AssetName("EV_1") == AssetName("ev-1") {
		t.Fatal("external ids that slug alike must get different names")
	}
	first, second := AssetName("charger-001"), AssetName("charger-001")
	if first != second {
		t.Fatal("asset names must be deterministic")
	}
	if got := EnrolmentName("mpan-1", flexv1.PropositionLimitedPause); got != "mpan-1.limited-pause" {
		t.Fatalf("enrolment name = %q", got)
	}
	if UsernameClaimName("Acme") == UsernameClaimName("acme") {
		t.Fatal("usernames are case-sensitive at login, so their claims must be too")
	}
	if id1, id2 := NewID(), NewID(); id1 == id2 {
		t.Fatal("ids must be unique")
	}
}
