package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// The ledger's status is a copy of the database's summary (rewardstore's TestSummary holds the
// figures themselves): nothing is summed here, times are kept to the second as the API server
// keeps them, and a recent transaction is dated as the household core dates it.
func TestSummarise(t *testing.T) {
	first := time.Date(2026, 1, 1, 12, 0, 0, 500_000_000, time.UTC)
	last := time.Date(2026, 1, 3, 9, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		name    string
		summary rewardstore.Summary
	}{
		{name: "no history"},
		{name: "a history", summary: rewardstore.Summary{
			Balance: household.Balance{Current: 400, Earnings: 1500, FirstReward: &first}, Revision: 7, Count: 3,
			LastCredited: &last, Recent: []flexv1.RewardTransaction{
				{ID: "c", Type: "correction", CreditPence: -100, SettlementDate: "2026-01-04"},
				{ID: "b", Type: "flex event", CreditPence: 500, StartTime: &metav1.Time{Time: last}},
				{ID: "w", Type: household.TransactionWithdrawal, CreditPence: -1000, PaymentStatus: "posted"},
			}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s flexv1.RewardLedgerStatus
			summarise(&s, c.summary)
			b := c.summary.Balance
			if *s.BalancePence != b.Current || *s.TotalEarnedPence != b.Earnings || *s.TransactionCount != c.summary.Count ||
				*s.HistoryRevision != c.summary.Revision {
				t.Errorf("status %+v, want the summary's figures %+v", s, c.summary)
			}
			if (s.FirstRewardedAt == nil) != (b.FirstReward == nil) ||
				s.FirstRewardedAt != nil && !s.FirstRewardedAt.Time.Equal(b.FirstReward.Truncate(time.Second)) {
				t.Errorf("first rewarded %v, want %v to the second", s.FirstRewardedAt, b.FirstReward)
			}
			if (s.LastCredited == nil) != (c.summary.LastCredited == nil) ||
				s.LastCredited != nil && !s.LastCredited.Time.Equal(*c.summary.LastCredited) {
				t.Errorf("last credited %v, want %v", s.LastCredited, c.summary.LastCredited)
			}
			if len(s.RecentTransactions) != len(c.summary.Recent) {
				t.Fatalf("recent %+v, want %d", s.RecentTransactions, len(c.summary.Recent))
			}
			for i, r := range s.RecentTransactions {
				tx := c.summary.Recent[i]
				at := household.TransactionTime(tx)
				if r.ID != tx.ID || r.CreditPence != tx.CreditPence || r.PaymentStatus != tx.PaymentStatus ||
					(r.At == nil) != at.IsZero() || r.At != nil && !r.At.Time.Equal(at) {
					t.Errorf("recent %d: %+v, want %+v at %v", i, r, tx, at)
				}
			}
		})
	}
}
