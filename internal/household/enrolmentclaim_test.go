package household_test

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
	"github.com/flexsite/flexsite/internal/household"
)

func TestEnrolmentClaimStanding(t *testing.T) {
	made := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	enr := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "declared-by-gitops"},
		Spec: flexv1.EnrolmentSpec{SiteName: "mpan-1012345678903", Proposition: flexv1.PropositionLimitedPause}}
	claim := household.NewEnrolmentClaim(enr)
	claim.CreationTimestamp = metav1.NewTime(made)
	if want := "mpan-1012345678903.limited-pause"; claim.Name != want || claim.Spec.EnrolmentName != enr.Name {
		t.Fatalf("claim %s for %s, want %s for %s", claim.Name, claim.Spec.EnrolmentName, want, enr.Name)
	}
	leaving := enr.DeepCopy()
	leaving.DeletionTimestamp = &metav1.Time{Time: made}
	elsewhere := enr.DeepCopy()
	elsewhere.Spec.Proposition = flexv1.PropositionFullAssetScheduleControl
	after := made.Add(household.EnrolmentClaimGrace)
	cases := []struct {
		name   string
		holder *flexv1.Enrolment
		at     time.Time
		want   claimrule.Standing
	}{
		{"stored, however old", enr, made.Add(24 * time.Hour), claimrule.Held},
		{"not stored yet, just claimed", nil, made, claimrule.Pending},
		{"never stored, after the grace", nil, after, claimrule.Stale},
		{"being deleted, after the grace", leaving, after, claimrule.Stale},
		{"the name now another proposition's enrolment", elsewhere, after, claimrule.Stale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := household.EnrolmentClaimStanding(claim, tc.holder, tc.at); got != tc.want {
				t.Errorf("standing = %v, want %v", got, tc.want)
			}
		})
	}
}

// The REST API's Enrolment (NewEnrolment) holds its place by its name; one under any other
// name, or named after another site or proposition, claims.
func TestEnrolmentHeldByName(t *testing.T) {
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: "mpan-1012345678903"}}
	rest := household.NewEnrolment(site, flexv1.PropositionLimitedPause, false)
	if !household.EnrolmentHeldByName(rest) {
		t.Errorf("the REST API's enrolment %s: not held by its name", rest.Name)
	}
	declared := rest.DeepCopy()
	declared.Name = "declared-by-gitops"
	other := rest.DeepCopy()
	other.Spec.Proposition = flexv1.PropositionFullAssetScheduleControl
	for _, e := range []*flexv1.Enrolment{declared, other} {
		if household.EnrolmentHeldByName(e) {
			t.Errorf("%s for %s in %s: held by its name", e.Name, e.Spec.SiteName, e.Spec.Proposition)
		}
	}
}
