package household

import (
	"errors"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// RewardPolicy holds the configurable withdrawal thresholds.
type RewardPolicy struct {
	// MinimumWithdrawalPence is the smallest balance a household may withdraw.
	MinimumWithdrawalPence int64
	// WithdrawalMinWaitDays is how long after its first reward a household must wait to withdraw.
	WithdrawalMinWaitDays int
}

// Balance is a site's ledger summed: the balance is every credit and debit (withdrawals that
// paid nothing out, PaymentUndone, not counted); earnings are the credits that are not
// withdrawals; the first reward starts the withdrawal wait. The sum itself is the database's
// (rewardstore.Store.Balance, one SQL query): every reader and the withdrawal read it there.
type Balance struct {
	Current, Earnings int64
	FirstReward       *time.Time
}

// TransactionWithdrawal is the type of a withdrawal transaction.
const TransactionWithdrawal flexv1.TransactionType = "withdrawal"

// PaymentPendingApproval is the payment status of a withdrawal the household just requested.
const PaymentPendingApproval flexv1.PaymentStatus = "pending_approval"

// PaymentUndone reports payment states in which a withdrawal paid nothing out, or its money
// came back: its debit no longer counts. They are final (PaymentChange), so the money returns
// to the balance exactly once.
func PaymentUndone(s flexv1.PaymentStatus) bool {
	switch s {
	case PaymentFailed, PaymentRejected, PaymentCancelled, PaymentReturned:
		return true
	}
	return false
}

// TransactionAt is when a transaction happened, the one rule of it: its start (nil: none),
// else its settlement date (YYYY-MM-DD, its midnight UTC); zero when it has neither. The
// history's order, the days a household is shown and the withdrawal wait all go by it.
func TransactionAt(start *time.Time, settlementDate string) time.Time {
	if start != nil {
		return *start
	}
	if d, err := time.Parse(time.DateOnly, settlementDate); err == nil {
		return d
	}
	return time.Time{}
}

// TransactionTime is when a transaction happened (TransactionAt).
func TransactionTime(tx flexv1.RewardTransaction) time.Time {
	var start *time.Time
	if tx.StartTime != nil {
		start = &tx.StartTime.Time
	}
	return TransactionAt(start, tx.SettlementDate)
}

// DaysUntilWaitMet counts the days left of the withdrawal wait; with no reward yet the
// whole wait lies ahead.
func (p RewardPolicy) DaysUntilWaitMet(b Balance, now time.Time) int {
	if b.FirstReward == nil {
		return p.WithdrawalMinWaitDays
	}
	elapsed := int(now.Sub(*b.FirstReward) / (24 * time.Hour))
	return max(0, p.WithdrawalMinWaitDays-elapsed)
}

// BelowMinimum reports whether the balance is under the withdrawal minimum.
func (p RewardPolicy) BelowMinimum(b Balance) bool { return b.Current < p.MinimumWithdrawalPence }

// CanWithdraw reports whether the household may withdraw its balance now.
func (p RewardPolicy) CanWithdraw(b Balance, now time.Time) bool {
	return b.Current > 0 && !p.BelowMinimum(b) && p.DaysUntilWaitMet(b, now) == 0
}

// ErrCannotWithdraw is a withdrawal request while can_withdraw does not hold.
var ErrCannotWithdraw = errors.New("the balance cannot be withdrawn now")

// Withdrawal is the transaction that withdraws the whole balance b now, waiting for the
// platform team's approval; ErrCannotWithdraw when the policy does not allow it. b is the
// site's balance as the database sums it, read under the lock that serialises the site's
// withdrawals (rewardstore.Store.Withdraw).
func (p RewardPolicy) Withdrawal(b Balance, now time.Time, id string) (flexv1.RewardTransaction, error) {
	if !p.CanWithdraw(b, now) {
		return flexv1.RewardTransaction{}, ErrCannotWithdraw
	}
	at := metav1.NewTime(now.UTC().Truncate(time.Second))
	return flexv1.RewardTransaction{ID: id, Type: TransactionWithdrawal, CreditPence: -b.Current, StartTime: &at,
		SettlementDate: at.Format(time.DateOnly), PaymentStatus: PaymentPendingApproval}, nil
}

// NewestFirst orders transactions as a statement reads, ties broken by id so pages are
// stable. It sorts pointers by times computed once (the ledger itself may be shared and
// read-only).
func NewestFirst(txs []flexv1.RewardTransaction) []*flexv1.RewardTransaction {
	type keyed struct {
		at time.Time
		tx *flexv1.RewardTransaction
	}
	keys := make([]keyed, len(txs))
	for i := range txs {
		keys[i] = keyed{at: TransactionTime(txs[i]), tx: &txs[i]}
	}
	slices.SortFunc(keys, func(a, b keyed) int {
		if c := b.at.Compare(a.at); c != 0 {
			return c
		}
		return strings.Compare(a.tx.ID, b.tx.ID)
	})
	out := make([]*flexv1.RewardTransaction, len(keys))
	for i, k := range keys {
		out[i] = k.tx
	}
	return out
}
