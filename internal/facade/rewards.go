package facade

import (
	"context"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
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

// daysUntilWaitMet counts the days left of the withdrawal wait (household.RewardPolicy).
func (s *Server) daysUntilWaitMet(b household.Balance) int {
	return s.Rewards.DaysUntilWaitMet(b, s.Now())
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
	b := household.BalanceOf(txs)
	sorted := household.NewestFirst(txs)
	out := TransactionsResponse{
		SiteID:                      site.Labels[flexv1.IDLabel],
		IsBelowWithdrawalMinimum:    s.Rewards.BelowMinimum(b),
		DaysUntilMinimumWaitTimeMet: s.daysUntilWaitMet(b),
	}
	var page []*flexv1.RewardTransaction
	if offset < len(sorted) {
		page = sorted[offset:min(len(sorted), offset+limit)]
	}
	out.Transactions = transactionRecords(page)
	return out, nil
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
	b := household.BalanceOf(txs)
	return BalanceInfo{
		CurrentBalancePence:             b.Current,
		TotalEarningsPence:              b.Earnings,
		MinimumWithdrawalThresholdPence: s.Rewards.MinimumWithdrawalPence,
		WithdrawalMinWaitDays:           s.Rewards.WithdrawalMinWaitDays,
		CanWithdraw:                     s.Rewards.CanWithdraw(b, s.Now()),
	}, nil
}
