package facade

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/units"
)

// TransactionRecord is one item of `transactions` (internal/record's: notifications carry it).
type TransactionRecord = record.Transaction

// TransactionsResponse answers GET /rewards/{site_id}/transactions.
type TransactionsResponse struct {
	SiteID                      string              `json:"site_id"`
	Transactions                []TransactionRecord `json:"transactions"`
	IsBelowWithdrawalMinimum    bool                `json:"is_below_withdrawal_minimum"`
	DaysUntilMinimumWaitTimeMet int                 `json:"days_until_minimum_wait_time_met"`
}

// BalanceInfo answers GET /rewards/{site_id}/info.
type BalanceInfo struct {
	CurrentBalancePence             int64 `json:"current_balance_pence"`
	TotalEarningsPence              int64 `json:"total_earnings_pence"`
	MinimumWithdrawalThresholdPence int64 `json:"minimum_withdrawal_threshold_pence"`
	WithdrawalMinWaitDays           int   `json:"withdrawal_min_wait_days"`
	CanWithdraw                     bool  `json:"can_withdraw"`
}

// balance sums a ledger: the balance is every credit and debit; earnings are the credits
// that are not withdrawals; the first reward starts the withdrawal wait.
type balance struct {
	current, earnings int64
	firstReward       *time.Time
}

func balanceOf(txs []flexv1.RewardTransaction) balance {
	var b balance
	for _, tx := range txs {
		if paymentUndone(tx.PaymentStatus) {
			continue // the money never left (or came back): it is still the household's
		}
		b.current += tx.CreditPence
		if tx.Type == "withdrawal" || tx.CreditPence <= 0 {
			continue
		}
		b.earnings += tx.CreditPence
		if at := transactionTime(tx); !at.IsZero() && (b.firstReward == nil || at.Before(*b.firstReward)) {
			b.firstReward = &at
		}
	}
	return b
}

// paymentUndone reports payment states in which a withdrawal paid nothing out.
func paymentUndone(s flexv1.PaymentStatus) bool {
	switch s {
	case "failed", "rejected", "cancelled", "returned":
		return true
	}
	return false
}

// transactionTime is when a transaction happened: its start, else its settlement date.
func transactionTime(tx flexv1.RewardTransaction) time.Time {
	if tx.StartTime != nil {
		return tx.StartTime.Time
	}
	if d, err := time.Parse(time.DateOnly, tx.SettlementDate); err == nil {
		return d
	}
	return time.Time{}
}

// daysUntilWaitMet counts the days left of the withdrawal wait; with no reward yet the
// whole wait lies ahead.
func (s *Server) daysUntilWaitMet(b balance) int {
	if b.firstReward == nil {
		return s.Rewards.WithdrawalMinWaitDays
	}
	elapsed := int(s.Now().Sub(*b.firstReward) / (24 * time.Hour))
	return max(0, s.Rewards.WithdrawalMinWaitDays-elapsed)
}

func (s *Server) ledgerOf(ctx context.Context, site *flexv1.Site) ([]flexv1.RewardTransaction, error) {
	// Read-only, so no deep copy of a year of transactions; callers copy what they reorder.
	ledger := &flexv1.RewardLedger{}
	err := s.Cache.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.RewardLedgerName(site.Name)}, ledger,
		client.UnsafeDisableDeepCopy)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return ledger.Spec.Transactions, err
}

func (s *Server) transactions(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	q := r.URL.Query()
	limit := f.queryInt(q, "limit", 100, 1, 1000)
	offset := f.queryInt(q, "offset", 0, 0, -1)
	if err := f.err(); err != nil {
		return nil, err
	}
	site, err := s.siteToRead(r, p)
	if err != nil {
		return nil, err
	}
	txs, err := s.ledgerOf(r.Context(), site)
	if err != nil {
		return nil, err
	}
	b := balanceOf(txs)
	sorted := newestFirst(txs)
	out := TransactionsResponse{
		SiteID:                      site.Labels[flexv1.IDLabel],
		IsBelowWithdrawalMinimum:    b.current < s.Rewards.MinimumWithdrawalPence,
		DaysUntilMinimumWaitTimeMet: s.daysUntilWaitMet(b),
	}
	var page []*flexv1.RewardTransaction
	if offset < len(sorted) {
		page = sorted[offset:min(len(sorted), offset+limit)]
	}
	out.Transactions = transactionRecords(page)
	return out, nil
}

// newestFirst orders transactions as a statement reads, ties broken by id so pages are
// stable. It sorts pointers by times computed once (the ledger itself is shared, read-only).
func newestFirst(txs []flexv1.RewardTransaction) []*flexv1.RewardTransaction {
	type keyed struct {
		at time.Time
		tx *flexv1.RewardTransaction
	}
	keys := make([]keyed, len(txs))
	for i := range txs {
		keys[i] = keyed{at: transactionTime(txs[i]), tx: &txs[i]}
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

// transactionRecords answers a page of transactions. The records' times and flex figures
// point into arrays shared by the page (one string holds every time, as formatTime writes
// them), not into an allocation each: a page is read once, as one answer.
func transactionRecords(page []*flexv1.RewardTransaction) []TransactionRecord {
	out := make([]TransactionRecord, len(page))
	const stamp = len("2006-01-02T15:04:05Z")
	text := make([]byte, 0, 2*stamp*len(page))
	ends := make([]int, 0, 2*len(page))
	appendTime := func(t *metav1.Time) {
		if t != nil {
			text = t.UTC().AppendFormat(text, time.RFC3339)
		}
		ends = append(ends, len(text))
	}
	for _, tx := range page {
		appendTime(tx.StartTime)
		appendTime(tx.EndTime)
	}
	all := string(text)
	times := make([]string, len(ends))
	kwh := make([]float64, len(page))
	start := 0
	for i, end := range ends {
		times[i], start = all[start:end], end
	}
	for i, tx := range page {
		out[i] = TransactionRecord{
			TransactionID: tx.ID, CreditPence: tx.CreditPence, TransactionType: tx.Type,
			SettlementDate: tx.SettlementDate, PaymentStatus: tx.PaymentStatus,
		}
		if tx.StartTime != nil {
			out[i].StartTime = &times[2*i]
		}
		if tx.EndTime != nil {
			out[i].EndTime = &times[2*i+1]
		}
		if tx.FlexWh != nil {
			kwh[i] = *units.ToKilo(tx.FlexWh)
			out[i].FlexKWh = &kwh[i]
		}
	}
	return out
}

func (s *Server) rewardInfo(r *http.Request, p *auth.Principal) (any, error) {
	site, err := s.siteToRead(r, p)
	if err != nil {
		return nil, err
	}
	txs, err := s.ledgerOf(r.Context(), site)
	if err != nil {
		return nil, err
	}
	b := balanceOf(txs)
	return BalanceInfo{
		CurrentBalancePence:             b.current,
		TotalEarningsPence:              b.earnings,
		MinimumWithdrawalThresholdPence: s.Rewards.MinimumWithdrawalPence,
		WithdrawalMinWaitDays:           s.Rewards.WithdrawalMinWaitDays,
		CanWithdraw: b.current > 0 && b.current >= s.Rewards.MinimumWithdrawalPence &&
			s.daysUntilWaitMet(b) == 0,
	}, nil
}
