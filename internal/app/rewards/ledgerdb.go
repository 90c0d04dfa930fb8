package rewards

import (
	"context"
	"errors"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/ledger"
	"github.com/flexsite/flexsite/internal/record"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// storeErr is what a failure of the reward database means to a caller: Unavailable (try
// again shortly: the door answers 503 with Retry-After) when the database is away, a conflict
// for a transaction id stored with other fields or a payment status change the payment's state
// machine refuses, not found for a transaction that is not there.
func storeErr(err error) error {
	var refused *household.PaymentChangeRefused
	switch {
	case err == nil:
		return nil
	case db.Unavailable(err):
		return &app.Error{Kind: app.Unavailable, Detail: "The rewards database is unavailable; try again shortly",
			RetryAfter: db.RetryAfterSeconds}
	case errors.Is(err, rewardstore.ErrConflict):
		return app.Fail(app.Conflict, "A transaction with this transaction_id is stored with other fields")
	case errors.As(err, &refused):
		msg := refused.Error()
		return app.Fail(app.Conflict, "%s%s", strings.ToUpper(msg[:1]), msg[1:])
	case errors.Is(err, db.ErrNotFound):
		return app.Fail(app.NotFound, "Transaction not found")
	case errors.Is(err, rewardstore.ErrNotWithdrawal):
		return app.InvalidFields(app.FieldError{Loc: []any{"path", "transaction_id"},
			Msg: "Only a withdrawal has a payment status", Type: "value_error"})
	}
	return err
}

func siteKey(site *flexv1.Site) rewardstore.Site {
	return rewardstore.Site{Namespace: site.Namespace, ID: site.Labels[flexv1.IDLabel]}
}

// TransactionsQuery selects part of a site's history, newest first, within [Since, Until)
// when they are set: Limit transactions from Offset, or with Limit 0 every transaction from
// Offset (the whole history), read a batch at a time (TransactionsPage.Next).
type TransactionsQuery struct {
	app.Paging
	Since, Until time.Time
}

// historyBatch is how many transactions a read of the whole history takes from the database
// at a time: the first batch in the statement that sums the balance, the others by position
// (rewardstore.Store.PageAfter). A history shorter than a batch (a decade of weekly rewards)
// is answered from that one statement, and kept as a page is; a longer one is never held
// whole: the door writes each batch before the next is read. 500 transactions are 24 KB
// packed (ledger), ~120 KB encoded.
const historyBatch = 500

// pageRoom is the room a page read makes for its rows at once, at most (a year of weekly
// rewards, and a few more): a page of up to that many packs with one allocation.
const pageRoom = 64

// TransactionsIn is a page of the caller's site's reward history, from the database.
func (s *Service) TransactionsIn(ctx context.Context, p *auth.Principal, siteID string, q TransactionsQuery) (*TransactionsPage, error) {
	site, err := s.Sites.SiteToRead(ctx, p, siteID)
	if err != nil {
		return nil, err
	}
	return s.transactionsOf(ctx, siteKey(site), q)
}

// transactionsOf is a page of a site's history from the database, or kept (pageCache).
func (s *Service) transactionsOf(ctx context.Context, key rewardstore.Site, q TransactionsQuery) (*TransactionsPage, error) {
	return s.readPage(ctx, key, q, true)
}

// readPage is a page of a site's history with the policy's verdicts on its balance, both from
// the database in one statement (the balance kept in pageCache for its other readers). With
// encoded (the REST door's read), a kept page may answer, and the page read may be kept. A
// page of Limit transactions reads one more, to say whether more follow (More); the whole
// history (Limit 0) reads its first batch, and the rest only as the door writes it (Next).
func (s *Service) readPage(ctx context.Context, key rewardstore.Site, q TransactionsQuery, encoded bool) (*TransactionsPage, error) {
	whole := q.Limit == 0
	cacheable := encoded && q.Since.IsZero() && q.Until.IsZero()
	pk := pageKey{limit: q.Limit, offset: q.Offset}
	if cacheable {
		if l, b := s.pages.page(key, pk); l != nil {
			page := &TransactionsPage{SiteID: key.ID, Ledger: l, From: 0, To: l.Len(), Kept: true,
				BelowMinimum: s.Policy.BelowMinimum(*b), DaysUntilWaitMet: s.Policy.DaysUntilWaitMet(*b, s.Now())}
			page.cut(q.Limit)
			return page, nil
		}
	}
	epoch := s.pages.Begin()
	read := s.batch
	if !whole {
		read = q.Limit + 1
	}
	// One statement answers the page and the balance, and the page is packed straight from its
	// rows (already in statement order) into the compact form the door encodes: a read that
	// misses the kept pages costs one round trip, not two, and builds no RewardTransaction.
	l := &ledger.Ledger{}
	l.Grow(min(read, pageRoom))
	var last rewardstore.Position
	b, err := s.Store.PageWithBalance(ctx, key, rewardstore.Page{Limit: read, Offset: q.Offset, Since: q.Since, Until: q.Until},
		func(row *rewardstore.PageRow) {
			l.Append(&row.Row)
			last = row.Position()
		})
	if err != nil {
		return nil, storeErr(err)
	}
	s.pages.keepBalance(key, epoch, b)
	page := &TransactionsPage{SiteID: key.ID, Ledger: l, From: 0, To: l.Len(),
		BelowMinimum: s.Policy.BelowMinimum(b), DaysUntilWaitMet: s.Policy.DaysUntilWaitMet(b, s.Now())}
	if whole && l.Len() == read {
		// Longer than a batch, perhaps: the rest is read as it is written, and nothing kept.
		page.rest = &historyReader{store: s.Store, key: key, after: last,
			page: rewardstore.Page{Limit: read, Since: q.Since, Until: q.Until}}
		return page, nil
	}
	page.cut(q.Limit)
	if cacheable {
		s.pages.keepPage(key, pk, epoch, l) // from now on read-only, shared by the reads it answers
	}
	return page, nil
}

// cut ends a page of limit transactions (0: the whole history) at its limit, and says
// whether more follow.
func (p *TransactionsPage) cut(limit int) {
	if limit > 0 && p.To > limit {
		p.To, p.More = limit, true
	}
}

// historyReader reads the whole history's batches after the first (TransactionsPage.Next).
type historyReader struct {
	store *rewardstore.Store
	key   rewardstore.Site
	page  rewardstore.Page
	after rewardstore.Position
	done  bool
}

// Streamed says whether the answer goes on past Ledger: the whole history was asked for and
// fills a batch, so the rest is read as the door writes it (Next).
func (p *TransactionsPage) Streamed() bool { return p.rest != nil }

// Next replaces the page's transactions with the next batch of the whole history (From..To
// over Ledger, whose memory it reuses: a batch is read until Next is called again); false
// when the history is done. A failure is the database's (storeErr).
func (p *TransactionsPage) Next(ctx context.Context) (bool, error) {
	h := p.rest
	if h == nil || h.done {
		return false, nil
	}
	if p.Kept { // shared with other reads: never reused (a streamed page is never kept)
		p.Ledger, p.Kept = &ledger.Ledger{}, false
	}
	l := p.Ledger
	l.Reset()
	n, err := h.store.PageAfter(ctx, h.key, h.page, h.after, func(row *rewardstore.PageRow) {
		l.Append(&row.Row)
		h.after = row.Position()
	})
	p.From, p.To = 0, l.Len()
	if err != nil {
		h.done = true
		return false, storeErr(err)
	}
	h.done = n < h.page.Limit
	return n > 0, nil
}

// keptBalance is the site's balance: kept (pageCache), else from the database (and kept).
func (s *Service) keptBalance(ctx context.Context, site *flexv1.Site) (household.Balance, error) {
	return s.balanceOf(ctx, siteKey(site), s.pages.Begin())
}

// balanceOf is the site's balance (rewardstore's SQL sum, the only one): kept (pageCache),
// else from the database, kept when nothing was invalidated since epoch.
func (s *Service) balanceOf(ctx context.Context, key rewardstore.Site, epoch uint64) (household.Balance, error) {
	if b := s.pages.balance(key); b != nil {
		return *b, nil
	}
	b, err := s.Store.Balance(ctx, key)
	if err != nil {
		return b, storeErr(err)
	}
	s.pages.keepBalance(key, epoch, b)
	return b, nil
}

// summaryBalance is a site's balance from its RewardLedger's summary (the manager's cache):
// the ledger controller copies it there from the database's sum (rewardstore.Store.Summary),
// so /info costs no SQL and answers while the database is away. A summary that does not show
// this replica's own latest write to the site yet gives way to the database (unless it is
// away), so that a client reads its writes. A site without a ledger has no history yet.
func (s *Service) summaryBalance(ctx context.Context, site *flexv1.Site) (household.Balance, error) {
	summary := &flexv1.RewardLedger{}
	err := s.Cache.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: identity.RewardLedgerName(site.Name)}, summary)
	if err != nil && !apierrors.IsNotFound(err) {
		return household.Balance{}, err
	}
	key := siteKey(site)
	if s.written.ahead(key, ptr.Deref(summary.Status.HistoryRevision, 0)) {
		b, err := s.keptBalance(ctx, site)
		if e := app.As(err); e == nil || e.Kind != app.Unavailable {
			return b, err
		}
	}
	return balanceOfSummary(&summary.Status), nil
}

// balanceOfSummary is the balance a RewardLedger's summary states (zero when it has none yet).
func balanceOfSummary(status *flexv1.RewardLedgerStatus) household.Balance {
	b := household.Balance{Current: ptr.Deref(status.BalancePence, 0), Earnings: ptr.Deref(status.TotalEarnedPence, 0)}
	if status.FirstRewardedAt != nil {
		first := status.FirstRewardedAt.UTC()
		b.FirstReward = &first
	}
	return b
}

// CreditInput is a transaction to add to a site's rewards (POST /rewards/{site_id}/transactions):
// the transaction record without a payment status.
type CreditInput = flexv1.RewardTransaction

// Credit adds a transaction to the caller's site's rewards, once: created is false when the
// same transaction_id was already stored with the same fields (the stored record is answered);
// the same id with other fields is a Conflict. A credit and its rewards.transaction_credited
// event are written in one SQL transaction.
func (s *Service) Credit(ctx context.Context, p *auth.Principal, siteID string, in CreditInput) (TransactionRecord, bool, error) {
	site, err := s.Sites.SiteToRead(ctx, p, siteID)
	if err != nil {
		return TransactionRecord{}, false, err
	}
	return s.credit(ctx, siteKey(site), in)
}

// credit appends in to a site's history and drops what this replica kept of it.
func (s *Service) credit(ctx context.Context, key rewardstore.Site, in CreditInput) (TransactionRecord, bool, error) {
	stored, created, err := s.Store.Append(ctx, key, in, rewardstore.SourceAPI)
	if err != nil {
		s.pages.Invalidate(key)
		return TransactionRecord{}, false, storeErr(err)
	}
	s.wrote(ctx, key)
	return record.TransactionOf(&stored), created, nil
}

// SetPaymentStatus moves a withdrawal of the caller's site to status, recording who (the
// caller's API client) and when; a step the payment's state machine does not allow from the
// current status (the same status included) is a Conflict and records nothing.
func (s *Service) SetPaymentStatus(ctx context.Context, p *auth.Principal, siteID, transactionID string,
	status flexv1.PaymentStatus) (TransactionRecord, error) {
	site, err := s.Sites.SiteToRead(ctx, p, siteID)
	if err != nil {
		return TransactionRecord{}, err
	}
	tx, err := s.Store.SetPaymentStatus(ctx, siteKey(site), transactionID, status, "api-client:"+p.Namespace+"/"+p.ClientName)
	if err != nil {
		s.pages.Invalidate(siteKey(site))
		return TransactionRecord{}, storeErr(err)
	}
	s.wrote(ctx, siteKey(site))
	return record.TransactionOf(&tx), nil
}

// withdraw records a withdrawal of the whole balance in the database, the site's row locked
// while the balance is summed and the withdrawal written.
func (s *Service) withdraw(ctx context.Context, site *flexv1.Site) error {
	_, err := s.Store.Withdraw(ctx, siteKey(site), func(b household.Balance) (flexv1.RewardTransaction, error) {
		return s.Policy.Withdrawal(b, s.Now(), newID())
	})
	if err != nil {
		s.pages.Invalidate(siteKey(site))
		return err
	}
	s.wrote(ctx, siteKey(site))
	return nil
}

// newID is a fresh transaction id.
func newID() string { return identity.NewID() }
