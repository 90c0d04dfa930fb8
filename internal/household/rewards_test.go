package household

import (
	"errors"
	"testing"
	"time"
)

// The policy's verdicts on a balance (summed by the database: rewardstore's tests hold the sum
// itself), and the withdrawal it makes.
func TestWithdrawal(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	daysAgo := func(n int) *time.Time { at := now.AddDate(0, 0, -n); return &at }
	policy := RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30}
	tests := []struct {
		name     string
		balance  Balance
		want     int64 // the withdrawal's credit; 0: refused
		daysLeft int
	}{
		{"nothing earned", Balance{}, 0, 30},
		{"below the minimum", Balance{Current: 999, Earnings: 999, FirstReward: daysAgo(40)}, 0, 0},
		{"wait not over", Balance{Current: 5000, Earnings: 5000, FirstReward: daysAgo(29)}, 0, 1},
		{"the whole balance", Balance{Current: 1700, Earnings: 1700, FirstReward: daysAgo(40)}, -1700, 0},
		{"already withdrawn, pending", Balance{Current: 0, Earnings: 1500, FirstReward: daysAgo(40)}, 0, 0},
		{"in debt after a correction", Balance{Current: -5, Earnings: 0, FirstReward: daysAgo(40)}, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := policy.DaysUntilWaitMet(tc.balance, now); got != tc.daysLeft {
				t.Errorf("days until wait met = %d, want %d", got, tc.daysLeft)
			}
			tx, err := policy.Withdrawal(tc.balance, now, "id-1")
			if tc.want == 0 {
				if !errors.Is(err, ErrCannotWithdraw) || policy.CanWithdraw(tc.balance, now) {
					t.Fatalf("want refused, got %+v, %v", tx, err)
				}
				return
			}
			if err != nil || !policy.CanWithdraw(tc.balance, now) {
				t.Fatal(err)
			}
			if tx.CreditPence != tc.want || tx.Type != TransactionWithdrawal || tx.PaymentStatus != PaymentPendingApproval ||
				tx.ID != "id-1" || !tx.StartTime.Time.Equal(now) || tx.SettlementDate != "2026-06-01" {
				t.Errorf("withdrawal %+v", tx)
			}
			after := Balance{Current: tc.balance.Current + tx.CreditPence, Earnings: tc.balance.Earnings, FirstReward: tc.balance.FirstReward}
			if after.Current != 0 || policy.CanWithdraw(after, now) {
				t.Errorf("after the withdrawal the balance is %d", after.Current)
			}
		})
	}
}
