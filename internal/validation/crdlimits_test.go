package validation

import (
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// TestSiteAssetsBound: the Site CRD's status.assets holds flexv1.MaxSiteAssets items, no
// fewer. A smaller bound refuses the status of a site onboarded with more assets, and its
// eligibility is then never current (every read of it answers 503).
func TestSiteAssetsBound(t *testing.T) {
	if got := CRDMaxItems["Site.status.assets"]; got != flexv1.MaxSiteAssets {
		t.Fatalf("status.assets maxItems = %d, want flexv1.MaxSiteAssets (%d)", got, flexv1.MaxSiteAssets)
	}
}

// TestAppSchemeBound: the APIClient CRD bounds a declared redirect scheme as AppScheme does.
func TestAppSchemeBound(t *testing.T) {
	if got := CRDMaxLength["APIClient.spec.redirectSchemes[*]"]; got != MaxAppSchemeLength {
		t.Fatalf("spec.redirectSchemes items maxLength = %d, want MaxAppSchemeLength (%d)", got, MaxAppSchemeLength)
	}
}
