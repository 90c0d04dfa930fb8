package household

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// TestHoldings reads docs/api.md, "The site and asset lifecycle": a site is deleted alone
// only when it has no assets and no enrolments (nor reward history, nor an onboarding still
// writing them); otherwise offboard removes everything.
func TestHoldings(t *testing.T) {
	live := metav1.ObjectMeta{Name: "live"}
	going := metav1.ObjectMeta{Name: "going", DeletionTimestamp: at(t0)}
	asset := func(m metav1.ObjectMeta) flexv1.Asset { return flexv1.Asset{ObjectMeta: m} }
	enrolment := func(m metav1.ObjectMeta) flexv1.Enrolment { return flexv1.Enrolment{ObjectMeta: m} }
	ledger := func(m metav1.ObjectMeta) flexv1.RewardLedger { return flexv1.RewardLedger{ObjectMeta: m} }
	cases := []struct {
		name       string
		assets     []flexv1.Asset
		enrolments []flexv1.Enrolment
		ledgers    []flexv1.RewardLedger
		inFlight   InFlightState
		empty      bool
		says       string
	}{
		{name: "nothing", empty: true, says: "nothing"},
		{name: "only children on their way out", assets: []flexv1.Asset{asset(going)},
			enrolments: []flexv1.Enrolment{enrolment(going)}, ledgers: []flexv1.RewardLedger{ledger(going)}, empty: true, says: "nothing"},
		{name: "an onboarding that wrote everything it named", inFlight: Written, empty: true, says: "nothing"},
		{name: "an abandoned onboarding", inFlight: Abandoned, empty: true, says: "nothing"},
		{name: "one asset", assets: []flexv1.Asset{asset(live), asset(going)}, says: "1 asset"},
		{name: "two assets", assets: []flexv1.Asset{asset(live), asset(live)}, says: "2 assets"},
		{name: "an enrolment", enrolments: []flexv1.Enrolment{enrolment(live)}, says: "1 enrolment"},
		{name: "a reward ledger", ledgers: []flexv1.RewardLedger{ledger(live)}, says: "a reward ledger"},
		{name: "an onboarding still writing", inFlight: Writing, says: "an onboarding still in progress"},
		{name: "everything", assets: []flexv1.Asset{asset(live), asset(live)},
			enrolments: []flexv1.Enrolment{enrolment(live)}, ledgers: []flexv1.RewardLedger{ledger(live), ledger(live)}, inFlight: Writing,
			says: "2 assets, 1 enrolment, 2 reward ledgers and an onboarding still in progress"},
		{name: "assets and an enrolment", assets: []flexv1.Asset{asset(live)},
			enrolments: []flexv1.Enrolment{enrolment(live), enrolment(live)}, says: "1 asset and 2 enrolments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := HoldingsOf(tc.assets, tc.enrolments, tc.ledgers, tc.inFlight)
			if h.Empty() != tc.empty {
				t.Errorf("Empty() = %v, want %v (%+v)", h.Empty(), tc.empty, h)
			}
			if h.String() != tc.says {
				t.Errorf("String() = %q, want %q", h.String(), tc.says)
			}
		})
	}
}
