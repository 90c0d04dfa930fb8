package household

import (
	"testing"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Every kind a Site owns names it; anything else names none.
func TestSiteNameOf(t *testing.T) {
	for obj, want := range map[any]string{
		&flexv1.Asset{Spec: flexv1.AssetSpec{SiteName: "a"}}:                       "a",
		&flexv1.Enrolment{Spec: flexv1.EnrolmentSpec{SiteName: "e"}}:               "e",
		&flexv1.DeviceConnection{Spec: flexv1.DeviceConnectionSpec{SiteName: "d"}}: "d",
		&flexv1.RewardLedger{Spec: flexv1.RewardLedgerSpec{SiteName: "l"}}:         "l",
		&flexv1.MPANClaim{Spec: flexv1.MPANClaimSpec{SiteName: "c"}}:               "c",
		&flexv1.Site{}:      "",
		&flexv1.FlexEvent{}: "",
	} {
		if got := SiteNameOf(obj); got != want {
			t.Errorf("SiteNameOf(%T) = %q, want %q", obj, got, want)
		}
	}
}
