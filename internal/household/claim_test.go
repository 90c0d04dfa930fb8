package household

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
)

// TestStanding reads claim.go: a claim binds while its site holds the MPAN, is pending for
// ClaimGrace while its site changes to it, and is stale after that or once its site is gone.
func TestStanding(t *testing.T) {
	made := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	claim := &flexv1.MPANClaim{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(made)},
		Spec: flexv1.MPANClaimSpec{MPAN: "1200000000011", SiteName: "mpan-2301234567894"}}
	site := func(mpan string, deleting bool) *flexv1.Site {
		s := &flexv1.Site{Spec: flexv1.SiteSpec{MPAN: mpan}}
		if deleting {
			s.DeletionTimestamp = &metav1.Time{Time: made}
		}
		return s
	}
	cases := []struct {
		name string
		site *flexv1.Site
		at   time.Time
		want claimrule.Standing
	}{
		{"its site holds the MPAN", site("1200000000011", false), made.Add(time.Hour), claimrule.Held},
		{"its site is changing to the MPAN", site("2301234567894", false), made.Add(time.Minute), claimrule.Pending},
		{"the change died half-way", site("2301234567894", false), made.Add(ClaimGrace), claimrule.Stale},
		{"its site is gone, within the grace", nil, made.Add(time.Second), claimrule.Pending},
		{"its site is gone", nil, made.Add(ClaimGrace + time.Second), claimrule.Stale},
		{"its site is being deleted", site("1200000000011", true), made.Add(ClaimGrace), claimrule.Stale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Standing(claim, tc.site, tc.at); got != tc.want {
				t.Errorf("Standing = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestStandingDeclared reads claim.go: the claim the Site controller makes for a site declared
// with its MPAN binds while the site holds the MPAN, and has no grace once it does not.
func TestStandingDeclared(t *testing.T) {
	made := time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC)
	declared := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "declared"}, Spec: flexv1.SiteSpec{MPAN: "1200000000011"}}
	claim := NewDeclaredClaim(declared, "1200000000011")
	claim.CreationTimestamp = metav1.NewTime(made)
	if !Declared(claim) || Declared(NewClaim(declared, "1200000000011")) {
		t.Fatalf("Declared tells the controller's claim from a request's")
	}
	moved := declared.DeepCopy()
	moved.Spec.MPAN = "2301234567894"
	cases := []struct {
		name string
		site *flexv1.Site
		at   time.Time
		want claimrule.Standing
	}{
		{"its site holds the MPAN", declared, made.Add(time.Hour), claimrule.Held},
		{"its site left the MPAN, at once", moved, made, claimrule.Stale},
		{"its site is gone, at once", nil, made.Add(time.Second), claimrule.Stale},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Standing(claim, tc.site, tc.at); got != tc.want {
				t.Errorf("Standing = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHoldsByName(t *testing.T) {
	for _, tc := range []struct {
		name, mpan string
		want       bool
	}{
		{"mpan-1200000000011", "1200000000011", true},
		{"mpan-1200000000011", "2301234567894", false},
		{"user-abc", "1200000000011", false},
		{"user-abc", "", false},
	} {
		site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: tc.name}, Spec: flexv1.SiteSpec{MPAN: tc.mpan}}
		if got := HoldsByName(site); got != tc.want {
			t.Errorf("HoldsByName(%s, %s) = %v, want %v", tc.name, tc.mpan, got, tc.want)
		}
	}
}
