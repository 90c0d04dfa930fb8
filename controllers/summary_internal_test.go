package controllers

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestSummarise(t *testing.T) {
	day := func(d int) *metav1.Time { return &metav1.Time{Time: time.Date(2026, 1, d, 12, 0, 0, 0, time.UTC)} }
	tx := func(id string, typ flexv1.TransactionType, pence int64, at *metav1.Time, status flexv1.PaymentStatus) flexv1.RewardTransaction {
		return flexv1.RewardTransaction{ID: id, Type: typ, CreditPence: pence, StartTime: at, PaymentStatus: status}
	}
	var many []flexv1.RewardTransaction
	for d := 1; d <= 12; d++ {
		many = append(many, tx(fmt.Sprintf("id-%02d", d), "flex period", 100, day(d), ""))
	}
	for _, c := range []struct {
		name                   string
		history                []flexv1.RewardTransaction
		balance, earned, count int64
		recent                 []string
		lastCredited           *metav1.Time
		firstRewarded          *metav1.Time
	}{
		{name: "none", count: 0},
		{name: "a credit and a withdrawal that paid out", history: []flexv1.RewardTransaction{
			tx("a", "flex event", 500, day(1), ""), tx("b", "withdrawal", -500, day(3), "posted")},
			balance: 0, earned: 500, count: 2, recent: []string{"b", "a"}, lastCredited: day(1), firstRewarded: day(1)},
		{name: "a failed withdrawal counts for nothing", history: []flexv1.RewardTransaction{
			tx("a", "flex event", 500, day(1), ""), tx("b", "withdrawal", -500, day(3), "failed")},
			balance: 500, earned: 500, count: 2, recent: []string{"b", "a"}, lastCredited: day(1), firstRewarded: day(1)},
		{name: "a correction takes back, earns nothing", history: []flexv1.RewardTransaction{
			tx("a", "flex event", 500, day(1), ""), tx("c", "correction", -100, day(2), "")},
			balance: 400, earned: 500, count: 2, recent: []string{"c", "a"}, lastCredited: day(1), firstRewarded: day(1)},
		{name: "the latest ten of twelve", history: many, balance: 1200, earned: 1200, count: 12,
			recent:       []string{"id-12", "id-11", "id-10", "id-09", "id-08", "id-07", "id-06", "id-05", "id-04", "id-03"},
			lastCredited: day(12), firstRewarded: day(1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s flexv1.RewardLedgerStatus
			summarise(&s, c.history, int64(len(c.history))+3)
			if *s.HistoryRevision != int64(len(c.history))+3 {
				t.Errorf("history revision %d, want the one read, %d", *s.HistoryRevision, len(c.history)+3)
			}
			if (s.FirstRewardedAt == nil) != (c.firstRewarded == nil) || s.FirstRewardedAt != nil && !s.FirstRewardedAt.Equal(c.firstRewarded) {
				t.Errorf("first rewarded %v, want %v", s.FirstRewardedAt, c.firstRewarded)
			}
			if *s.BalancePence != c.balance || *s.TotalEarnedPence != c.earned || *s.TransactionCount != c.count {
				t.Errorf("balance %d, earned %d, count %d; want %d, %d, %d", *s.BalancePence, *s.TotalEarnedPence,
					*s.TransactionCount, c.balance, c.earned, c.count)
			}
			ids := make([]string, 0, len(s.RecentTransactions))
			for _, r := range s.RecentTransactions {
				ids = append(ids, r.ID)
			}
			if fmt.Sprint(ids) != fmt.Sprint(c.recent) {
				t.Errorf("recent %v, want %v", ids, c.recent)
			}
			if (s.LastCredited == nil) != (c.lastCredited == nil) || s.LastCredited != nil && !s.LastCredited.Equal(c.lastCredited) {
				t.Errorf("last credited %v, want %v", s.LastCredited, c.lastCredited)
			}
		})
	}
}
