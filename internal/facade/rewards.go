package facade

import (
	"context"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/units"
)

// TransactionRecord is one item of `transactions` (internal/record's: notifications carry it too).
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

// LedgerReader finds a site's reward history in compact form (internal/ledger's Feed).
type LedgerReader interface {
	Get(namespace, name string) (*ledger.Ledger, bool, error)
}

// ledgerOf is the site's reward history: from Config.Ledgers (the manager's), or else read
// from the API server (the cache keeps ledgers without their transactions) and compacted for
// this request. nil when the site has no ledger.
func (s *Server) ledgerOf(ctx context.Context, site *flexv1.Site) (*ledger.Ledger, error) {
	name := identity.RewardLedgerName(site.Name)
	if s.Ledgers != nil {
		l, _, err := s.Ledgers.Get(site.Namespace, name)
		return l, err
	}
	obj := &flexv1.RewardLedger{}
	err := s.APIReader.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return ledger.New(obj.ResourceVersion, obj.Spec.Transactions), nil
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
	l, err := s.ledgerOf(r.Context(), site)
	if err != nil {
		return nil, err
	}
	var b household.Balance
	if l != nil {
		b = l.Balance
	}
	return &transactionsPage{siteID: site.Labels[flexv1.IDLabel], ledger: l,
		from: min(offset, l.Len()), to: min(l.Len(), offset+limit),
		below: s.Rewards.BelowMinimum(b), days: s.daysUntilWaitMet(b)}, nil
}

// transactionRecords answers transactions from..to of a ledger (newest first). The records'
// times and flex figures point into arrays shared by the page (one string holds every time,
// as formatTime writes them), not into an allocation each: a page is read once, as one answer.
func transactionRecords(l *ledger.Ledger, from, to int) []TransactionRecord {
	n := max(0, to-from)
	out := make([]TransactionRecord, n)
	const stamp = len("2006-01-02T15:04:05Z")
	const uuid = len("00000000-0000-0000-0000-000000000000")
	text := make([]byte, 0, n*(2*stamp+uuid+len(time.DateOnly)))
	ends := make([]int, 0, 4*n)
	appendTime := func(t time.Time, ok bool) {
		if ok {
			text = t.AppendFormat(text, time.RFC3339)
		}
		ends = append(ends, len(text))
	}
	for i := range n {
		tx := l.At(from + i)
		appendTime(tx.StartTime())
		appendTime(tx.EndTime())
		text = l.AppendID(text, from+i)
		ends = append(ends, len(text))
		text = l.AppendSettlementDate(text, from+i)
		ends = append(ends, len(text))
	}
	all := string(text)
	parts := make([]string, len(ends))
	kwh := make([]float64, n)
	start := 0
	for i, end := range ends {
		parts[i], start = all[start:end], end
	}
	for i := range n {
		tx := l.At(from + i)
		field := parts[4*i : 4*i+4]
		out[i] = TransactionRecord{
			TransactionID: field[2], CreditPence: tx.CreditPence(), TransactionType: tx.Type(),
			SettlementDate: field[3], PaymentStatus: tx.PaymentStatus(),
		}
		if _, ok := tx.StartTime(); ok {
			out[i].StartTime = &field[0]
		}
		if _, ok := tx.EndTime(); ok {
			out[i].EndTime = &field[1]
		}
		if wh, ok := tx.FlexWh(); ok {
			kwh[i] = *units.ToKilo(&wh)
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
	l, err := s.ledgerOf(r.Context(), site)
	if err != nil {
		return nil, err
	}
	var b household.Balance
	if l != nil {
		b = l.Balance
	}
	return BalanceInfo{
		CurrentBalancePence:             b.Current,
		TotalEarningsPence:              b.Earnings,
		MinimumWithdrawalThresholdPence: s.Rewards.MinimumWithdrawalPence,
		WithdrawalMinWaitDays:           s.Rewards.WithdrawalMinWaitDays,
		CanWithdraw:                     s.Rewards.CanWithdraw(b, s.Now()),
	}, nil
}
