// Package rewards holds the use cases of a household's rewards: its history and balance, the
// one-time link to the hosted rewards page and the session it opens, the emailed code, bank
// details and withdrawals. The balance is the database's sum (internal/rewardstore), which
// every use case here reads; the rules on it (thresholds, when a household may withdraw) are
// internal/household's. It speaks no HTTP: the REST API and the rewards page translate what it
// answers.
package rewards

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/mail"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/units"
)

// DefaultHostedNamespace is the manager's namespace unless Config.HostedNamespace says: the
// bank details key Secret lives there.
const DefaultHostedNamespace = "flexsite-system"

// Config wires the rewards use cases.
type Config struct {
	Log logr.Logger
	// Sites finds the caller's site (the household use cases').
	Sites *app.Service
	// APIReader and Client read and write past the cache.
	APIReader client.Reader
	Client    client.Client
	// Cache reads API clients (their rewards two-factor default).
	Cache client.Reader
	// Store is the reward ledger in PostgreSQL (required): every read and write of the history,
	// and the balance, are the database's (RewardLedgers hold a summary and an inbox).
	Store *rewardstore.Store
	// Private holds the rewards links, their sessions and sites' bank details (required).
	Private *pagestore.Store
	Policy  household.RewardPolicy
	// Mailer sends the emailed codes (nil: none can be sent).
	Mailer mail.Mailer
	// HostedNamespace is the manager's namespace (default DefaultHostedNamespace).
	HostedNamespace string
	// Now is the clock (tests replace it).
	Now func() time.Time
}

// Service runs the rewards use cases.
type Service struct {
	Config
	// pages keeps encoded transactions pages and balances read from Store (Listen).
	pages pageCache
	// written remembers the revisions of this replica's writes the summaries do not show yet.
	written *writtenRevisions
	// batch is how many transactions a read of the whole history takes at a time
	// (historyBatch; tests make it small).
	batch int
}

// New builds the rewards use cases. The database is required: Flexsite has no mode without
// one (cmd/manager refuses to start without it), so a Config without Store or Private is a
// wiring mistake, refused here rather than met by a request.
func New(cfg Config) *Service {
	if cfg.Store == nil || cfg.Private == nil {
		panic("rewards.New: Config.Store and Config.Private are required (the reward database)")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.HostedNamespace == "" {
		cfg.HostedNamespace = DefaultHostedNamespace
	}
	return &Service{Config: cfg, pages: newPageCache(keptPageBytes()), written: newWrittenRevisions(),
		batch: historyBatch}
}

// TransactionRecord is one item of `transactions` (internal/record's: notifications carry it too).
type TransactionRecord = record.Transaction

// TransactionsResponse is a page of a site's reward history as records.
type TransactionsResponse struct {
	SiteID                      string              `json:"site_id"`
	Transactions                []TransactionRecord `json:"transactions"`
	IsBelowWithdrawalMinimum    bool                `json:"is_below_withdrawal_minimum"`
	DaysUntilMinimumWaitTimeMet int                 `json:"days_until_minimum_wait_time_met"`
}

// BalanceInfo is a site's balance, earnings and whether the household may withdraw.
type BalanceInfo struct {
	CurrentBalancePence             int64 `json:"current_balance_pence"`
	TotalEarningsPence              int64 `json:"total_earnings_pence"`
	MinimumWithdrawalThresholdPence int64 `json:"minimum_withdrawal_threshold_pence"`
	WithdrawalMinWaitDays           int   `json:"withdrawal_min_wait_days"`
	CanWithdraw                     bool  `json:"can_withdraw"`
}

// TransactionsPage is a page of a site's reward history straight from the compact ledger:
// transactions From..To (newest first). A door encodes it as the TransactionsResponse of the
// same page (Response) would be, with no record built in between. When the whole history was
// asked for and is longer than a batch (Streamed), Ledger holds its first batch and Next reads
// the others, one at a time.
type TransactionsPage struct {
	SiteID   string
	Ledger   *ledger.Ledger
	From, To int
	// BelowMinimum and DaysUntilWaitMet are the withdrawal policy's verdicts on the balance.
	BelowMinimum     bool
	DaysUntilWaitMet int
	// Kept: the page was answered from what this replica keeps (pageCache), with no SQL. The
	// Ledger is then shared with other reads: read-only.
	Kept bool
	// More: a page of Limit transactions has more after it (at Offset+Limit).
	More bool
	// rest reads the whole history's further batches (nil: the page is the whole answer).
	rest *historyReader
}

// Response is the page as a TransactionsResponse.
func (p *TransactionsPage) Response() TransactionsResponse {
	return TransactionsResponse{SiteID: p.SiteID, Transactions: TransactionRecords(p.Ledger, p.From, p.To),
		IsBelowWithdrawalMinimum: p.BelowMinimum, DaysUntilMinimumWaitTimeMet: p.DaysUntilWaitMet}
}

// Transactions is the newest page of the caller's site's reward history as records (the
// hosted flow's), read from the database as TransactionsIn reads it, never from a kept page:
// a door that builds records needs the ledger, not an encoded body.
func (s *Service) Transactions(ctx context.Context, p *auth.Principal, siteID string, pg app.Paging) (*TransactionsPage, error) {
	site, err := s.Sites.SiteToRead(ctx, p, siteID)
	if err != nil {
		return nil, err
	}
	return s.readPage(ctx, siteKey(site), TransactionsQuery{Paging: pg}, false)
}

// Info is the caller's site's balance, earnings and whether the household may withdraw.
func (s *Service) Info(ctx context.Context, p *auth.Principal, siteID string) (BalanceInfo, error) {
	site, err := s.Sites.SiteToRead(ctx, p, siteID)
	if err != nil {
		return BalanceInfo{}, err
	}
	b, err := s.summaryBalance(ctx, site)
	if err != nil {
		return BalanceInfo{}, err
	}
	return BalanceInfo{
		CurrentBalancePence:             b.Current,
		TotalEarningsPence:              b.Earnings,
		MinimumWithdrawalThresholdPence: s.Policy.MinimumWithdrawalPence,
		WithdrawalMinWaitDays:           s.Policy.WithdrawalMinWaitDays,
		CanWithdraw:                     s.Policy.CanWithdraw(b, s.Now()),
	}, nil
}

// TransactionRecords answers transactions from..to of a ledger (newest first). The records'
// times and flex figures point into arrays shared by the page (one string holds every time),
// not into an allocation each: a page is read once, as one answer.
func TransactionRecords(l *ledger.Ledger, from, to int) []TransactionRecord {
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
