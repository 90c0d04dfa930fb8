package household

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

func TestWithdrawal(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	at := func(daysAgo int) *metav1.Time { t := metav1.NewTime(now.AddDate(0, 0, -daysAgo)); return &t }
	reward := func(id string, pence int64, daysAgo int) flexv1.RewardTransaction {
		return flexv1.RewardTransaction{ID: id, Type: "flex event", CreditPence: pence, StartTime: at(daysAgo)}
	}
	withdrawal := func(id string, pence int64, status flexv1.PaymentStatus) flexv1.RewardTransaction {
		return flexv1.RewardTransaction{ID: id, Type: TransactionWithdrawal, CreditPence: pence, StartTime: at(1), PaymentStatus: status}
	}
	policy := RewardPolicy{MinimumWithdrawalPence: 1000, WithdrawalMinWaitDays: 30}
	tests := []struct {
		name     string
		txs      []flexv1.RewardTransaction
		want     int64 // the withdrawal's credit; 0: refused
		daysLeft int
	}{
		{"nothing earned", nil, 0, 30},
		{"below the minimum", []flexv1.RewardTransaction{reward("a", 999, 40)}, 0, 0},
		{"wait not over", []flexv1.RewardTransaction{reward("a", 5000, 29)}, 0, 1},
		{"the whole balance", []flexv1.RewardTransaction{reward("a", 1500, 40), reward("b", 200, 2)}, -1700, 0},
		{"already withdrawn, pending", []flexv1.RewardTransaction{reward("a", 1500, 40), withdrawal("w", -1500, PaymentPendingApproval)}, 0, 0},
		{"a failed withdrawal gives the money back", []flexv1.RewardTransaction{reward("a", 1500, 40), withdrawal("w", -1500, "failed")}, -1500, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := BalanceOf(tc.txs)
			if got := policy.DaysUntilWaitMet(b, now); got != tc.daysLeft {
				t.Errorf("days until wait met = %d, want %d", got, tc.daysLeft)
			}
			tx, err := policy.Withdrawal(tc.txs, now, "id-1")
			if tc.want == 0 {
				if !errors.Is(err, ErrCannotWithdraw) || policy.CanWithdraw(b, now) {
					t.Fatalf("want refused, got %+v, %v", tx, err)
				}
				return
			}
			if err != nil || !policy.CanWithdraw(b, now) {
				t.Fatal(err)
			}
			if tx.CreditPence != tc.want || tx.Type != TransactionWithdrawal || tx.PaymentStatus != PaymentPendingApproval ||
				tx.ID != "id-1" || !tx.StartTime.Time.Equal(now) || tx.SettlementDate != "2026-06-01" {
				t.Errorf("withdrawal %+v", tx)
			}
			if after := BalanceOf(append(tc.txs, tx)); after.Current != 0 || policy.CanWithdraw(after, now) {
				t.Errorf("after the withdrawal the balance is %d", after.Current)
			}
		})
	}
}
