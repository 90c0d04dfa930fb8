package tenancy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
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
		want   ClaimStanding
	}{
		{"holder has the username", claimAt(time.Hour), &holder, ClaimHeld},
		{"holder not stored yet", claimAt(time.Second), nil, ClaimPending},
		{"holder never stored", claimAt(ClaimGrace), nil, ClaimStale},
		{"holder moved to another username a moment ago", claimAt(time.Second), &renamed, ClaimPending},
		{"holder moved to another username", claimAt(time.Hour), &renamed, ClaimStale},
		{"holder being deleted", claimAt(time.Hour), &gone, ClaimStale},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Standing(tc.claim, tc.holder, now); got != tc.want {
				t.Errorf("Standing() = %d, want %d", got, tc.want)
			}
		})
	}
}
