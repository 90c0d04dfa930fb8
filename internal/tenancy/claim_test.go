package tenancy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	claimrule "github.com/flexsite/flexsite/internal/claim"
)

func TestStanding(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	holder := apiClient("acme", "app", "acme-app")
	claimAt := func(age time.Duration) *flexv1.UsernameClaim {
		c := NewClaim(&holder)
		c.CreationTimestamp = metav1.NewTime(now.Add(-age))
		return c
	}
	renamed := apiClient("acme", "app", "acme-app-2")
	gone := deleting(holder)
	for _, tc := range []struct {
		name   string
		claim  *flexv1.UsernameClaim
		holder *flexv1.APIClient
		want   claimrule.Standing
	}{
		{"holder has the username", claimAt(time.Hour), &holder, claimrule.Held},
		{"holder not stored yet", claimAt(time.Second), nil, claimrule.Pending},
		{"holder never stored", claimAt(ClaimGrace), nil, claimrule.Stale},
		{"holder moved to another username a moment ago", claimAt(time.Second), &renamed, claimrule.Pending},
		{"holder moved to another username", claimAt(time.Hour), &renamed, claimrule.Stale},
		{"holder being deleted", claimAt(time.Hour), &gone, claimrule.Stale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Standing(tc.claim, tc.holder, now); got != tc.want {
				t.Errorf("Standing() = %d, want %d", got, tc.want)
			}
		})
	}
}
