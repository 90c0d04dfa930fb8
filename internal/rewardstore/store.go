// Package rewardstore is the reward ledger in PostgreSQL (internal/db's tables): every
// transaction appended once and never rewritten, withdrawals' payment status changes with who
// and when, and the `rewards.transaction_credited` event written to the outbox in the same SQL
// transaction as its credit. Every query names the organisation (the namespace) and the site
// (its API id). The REST API's use cases (internal/app/rewards) and the RewardLedger controller
// (the spec's inbox, the status summary) both use it. The balance is summed here, in SQL
// alone (Balance), and every reader takes it from here; the rules around it (which payment
// statuses paid nothing out, when a household may withdraw) stay internal/household's.
package rewardstore

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/record"
)

// Source says who put a transaction in the ledger.
type Source string

// The sources of transactions (the table's CHECK lists the same).
const (
	SourceAPI        Source = "api"
	SourceLedgerSpec Source = "ledger-spec"
	SourceSettlement Source = "settlement"
	SourceWithdrawal Source = "hosted-withdrawal"
)

// ChangedChannel is the PostgreSQL NOTIFY channel a commit that changes a site's ledger
// signals on, with the payload "<namespace>/<site id>": the RewardLedger controller listens,
// to write the ledger's summary.
const ChangedChannel = "flexsite_reward_ledger_changed"

// ErrConflict is a transaction id already stored in the organisation with another record (or
// at another of its sites). Another organisation's ids are never met: an id is unique within
// its organisation only (migration 00013).
var ErrConflict = errors.New("a transaction with this id is stored with other fields")

// ErrNotWithdrawal is a payment status change asked of a transaction that is not a withdrawal.
var ErrNotWithdrawal = errors.New("only a withdrawal has a payment status")

// Site names a site's ledger: its organisation (namespace) and API id.
type Site struct {
	Namespace, ID string
}

// Store is the reward ledger in PostgreSQL.
type Store struct {
	Pool *pgxpool.Pool
	// Now is the clock of event timestamps (nil: time.Now).
	Now func() time.Time
}

func (s *Store) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Digest is a transaction's identity for idempotency: SHA-256 of its fields as first written
// (the payment status is the withdrawal's first one).
func Digest(tx flexv1.RewardTransaction) []byte {
	rec := record.TransactionOf(&tx)
	data, _ := json.Marshal(rec)
	sum := sha256.Sum256(data)
	return sum[:]
}

// occurredAt is when a transaction happened, for the statement order (household's rule).
func occurredAt(tx flexv1.RewardTransaction) *time.Time {
	t := household.TransactionTime(tx)
	if t.IsZero() {
		return nil
	}
	return &t
}

// Append stores tx at site, once: created is false when the same id was already stored with
// the same record (the stored one is answered), ErrConflict when with another. A credit
// (a positive amount that is not a withdrawal) writes its rewards.transaction_credited event to
// the outbox in the same SQL transaction.
func (s *Store) Append(ctx context.Context, site Site, tx flexv1.RewardTransaction, source Source) (
	stored flexv1.RewardTransaction, created bool, err error) {
	err = s.inTx(ctx, func(q pgx.Tx) error {
		stored, created, err = s.append(ctx, q, site, tx, source, true)
		return err
	})
	return stored, created, err
}

// AppendMany is Append of every transaction of txs, in one SQL transaction: all of them or none
// (a conflict on any refuses the lot). Listeners are told once.
func (s *Store) AppendMany(ctx context.Context, site Site, txs []flexv1.RewardTransaction, source Source) error {
	return s.inTx(ctx, func(q pgx.Tx) error {
		for _, tx := range txs {
			if _, _, err := s.append(ctx, q, site, tx, source, true); err != nil {
				return err
			}
		}
		return nil
	})
}

// Import is Append for a transaction whose credit was already told (by an earlier version,
// from a RewardLedger's spec): no event is written.
func (s *Store) Import(ctx context.Context, site Site, tx flexv1.RewardTransaction, source Source) (
	stored flexv1.RewardTransaction, created bool, err error) {
	err = s.inTx(ctx, func(q pgx.Tx) error {
		stored, created, err = s.append(ctx, q, site, tx, source, false)
		return err
	})
	return stored, created, err
}

func (s *Store) append(ctx context.Context, q pgx.Tx, site Site, tx flexv1.RewardTransaction, source Source, tell bool) (
	flexv1.RewardTransaction, bool, error) {
	if _, err := uuid.Parse(tx.ID); err != nil {
		return tx, false, fmt.Errorf("transaction id %q is not a UUID", tx.ID)
	}
	if !household.CreditInRange(tx.CreditPence) {
		return tx, false, fmt.Errorf("credit_pence %d is beyond ±%d", tx.CreditPence, int64(household.MaxTransactionPence))
	}
	if _, err := q.Exec(ctx, `INSERT INTO reward_sites (organisation, site_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		site.Namespace, site.ID); err != nil {
		return tx, false, err
	}
	digest := Digest(tx)
	var settlement *time.Time
	if tx.SettlementDate != "" {
		d, err := time.Parse(time.DateOnly, tx.SettlementDate)
		if err != nil {
			return tx, false, fmt.Errorf("settlement date %q is not YYYY-MM-DD", tx.SettlementDate)
		}
		settlement = &d
	}
	var payment *string
	if tx.PaymentStatus != "" {
		p := string(tx.PaymentStatus)
		payment = &p
	}
	tag, err := q.Exec(ctx, `INSERT INTO reward_transactions (organisation, site_id, transaction_id, transaction_type,
		credit_pence, flex_wh, start_at, end_at, settlement_date, occurred_at, initial_payment_status, source, request_digest)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
		ON CONFLICT (organisation, site_id, transaction_id) DO NOTHING`,
		site.Namespace, site.ID, tx.ID, string(tx.Type), tx.CreditPence, tx.FlexWh, timeOf(tx.StartTime), timeOf(tx.EndTime),
		settlement, occurredAt(tx), payment, string(source), digest)
	if err != nil {
		var ce *db.ConstraintError
		if errors.As(db.Classify(err), &ce) && ce.Kind == "unique" {
			return tx, false, ErrConflict // the id is another site's of the organisation
		}
		return tx, false, err
	}
	if tag.RowsAffected() == 0 {
		var stored []byte
		if err := q.QueryRow(ctx, `SELECT request_digest FROM reward_transactions
			WHERE organisation = $1 AND site_id = $2 AND transaction_id = $3`, site.Namespace, site.ID, tx.ID).Scan(&stored); err != nil {
			return tx, false, err
		}
		if string(stored) != string(digest) {
			return tx, false, ErrConflict
		}
		current, err := s.get(ctx, q, site, tx.ID)
		return current, false, err
	}
	if tell && tx.Type != household.TransactionWithdrawal && tx.CreditPence > 0 {
		if err := s.outboxCredit(ctx, q, site, tx); err != nil {
			return tx, false, err
		}
	}
	return tx, true, s.notify(ctx, q, site)
}

func timeOf(t *metav1.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := t.UTC()
	return &v
}

// notify signals the site's ledger changed, delivered to listeners when the SQL transaction
// commits (and not at all if it rolls back).
func (s *Store) notify(ctx context.Context, q pgx.Tx, site Site) error {
	_, err := q.Exec(ctx, `SELECT pg_notify($1, $2)`, ChangedChannel, site.Namespace+"/"+site.ID)
	return err
}

// CreditEvent is tx's rewards.transaction_credited event as the outbox keeps it: its id,
// derived from the organisation and the transaction's id (the same credit is the same event;
// a transaction id names a transaction within its organisation only, so two organisations'
// credits under one id are two events), and its data as delivered (internal/events' body).
// Every writer of a credit (this store, settlement) builds the event here.
func CreditEvent(site Site, tx flexv1.RewardTransaction) (id string, data []byte, err error) {
	data, err = json.Marshal(struct {
		SiteID string `json:"site_id"`
		record.Transaction
	}{SiteID: site.ID, Transaction: record.TransactionOf(&tx)})
	id = "evt_" + uuid.NewSHA1(uuid.NameSpaceOID,
		[]byte("rewards.transaction_credited/"+site.Namespace+"/"+tx.ID)).String()
	return id, data, err
}

// outboxCredit writes tx's rewards.transaction_credited event (CreditEvent).
func (s *Store) outboxCredit(ctx context.Context, q pgx.Tx, site Site, tx flexv1.RewardTransaction) error {
	id, data, err := CreditEvent(site, tx)
	if err != nil {
		return err
	}
	_, err = q.Exec(ctx, `INSERT INTO outbox (organisation, site_id, event_type, event_id, payload, created_at)
		VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (organisation, event_id) DO NOTHING`,
		site.Namespace, site.ID, string(flexv1.EventRewardsTransactionCredited), id, data, s.now().UTC())
	return err
}

// NotifyChanged signals, in the caller's SQL transaction, that these sites' ledgers changed
// (delivered to listeners when it commits): for writers of credits outside this store.
func NotifyChanged(ctx context.Context, q pgx.Tx, namespace string, siteIDs []string) error {
	_, err := q.Exec(ctx, `SELECT pg_notify($1, $2 || '/' || site) FROM unnest($3::text[]) AS site`,
		ChangedChannel, namespace, siteIDs)
	return err
}

// inTx runs f in one SQL transaction, classifying what fails (db.ErrUnavailable, ...).
func (s *Store) inTx(ctx context.Context, f func(pgx.Tx) error) error {
	err := pgx.BeginFunc(ctx, s.Pool, f)
	if err == nil {
		return nil
	}
	var refused *household.PaymentChangeRefused
	if errors.Is(err, ErrConflict) || errors.Is(err, household.ErrCannotWithdraw) || errors.Is(err, ErrNotWithdrawal) ||
		errors.As(err, &refused) {
		return err
	}
	return s.classify(err)
}

// classify is db.ClassifyOn the store's pool.
func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// selectTransactions reads transactions with their current payment status (the initial one,
// or the latest change's).
const selectTransactions = `SELECT t.transaction_id::text, t.transaction_type, t.credit_pence, t.flex_wh, t.start_at, t.end_at,
	t.settlement_date, ` + currentStatus + `
	FROM reward_transactions t`

// currentStatus is the payment status of the transaction t: the latest change's, else its
// initial one (empty when it has none). Only a withdrawal's status changes (SetPaymentStatus
// refuses any other), so only a withdrawal looks its changes up: a history of rewards costs no
// lookup a transaction.
const currentStatus = `CASE WHEN t.transaction_type = 'withdrawal' THEN coalesce((SELECT c.to_status
		FROM withdrawal_status_changes c
		WHERE c.organisation = t.organisation AND c.site_id = t.site_id AND c.transaction_id = t.transaction_id
		ORDER BY c.seq DESC LIMIT 1), t.initial_payment_status, '') ELSE coalesce(t.initial_payment_status, '') END`

func scanTransactions(rows pgx.Rows) ([]flexv1.RewardTransaction, error) {
	var out []flexv1.RewardTransaction
	for rows.Next() {
		var tx flexv1.RewardTransaction
		var typ, payment string
		var start, end, settlement *time.Time
		if err := rows.Scan(&tx.ID, &typ, &tx.CreditPence, &tx.FlexWh, &start, &end, &settlement, &payment); err != nil {
			return nil, err
		}
		tx.Type, tx.PaymentStatus = flexv1.TransactionType(typ), flexv1.PaymentStatus(payment)
		if start != nil {
			tx.StartTime = &metav1.Time{Time: start.UTC()}
		}
		if end != nil {
			tx.EndTime = &metav1.Time{Time: end.UTC()}
		}
		if settlement != nil {
			tx.SettlementDate = settlement.Format(time.DateOnly)
		}
		out = append(out, tx)
	}
	return out, rows.Err()
}

type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

func (s *Store) get(ctx context.Context, q querier, site Site, id string) (flexv1.RewardTransaction, error) {
	rows, err := q.Query(ctx, selectTransactions+` WHERE t.organisation = $1 AND t.site_id = $2 AND t.transaction_id = $3`,
		site.Namespace, site.ID, id)
	if err != nil {
		return flexv1.RewardTransaction{}, err
	}
	defer rows.Close()
	txs, err := scanTransactions(rows)
	if err != nil {
		return flexv1.RewardTransaction{}, err
	}
	if len(txs) == 0 {
		return flexv1.RewardTransaction{}, db.ErrNotFound
	}
	return txs[0], nil
}

// All is a site's whole history (any order).
func (s *Store) All(ctx context.Context, site Site) ([]flexv1.RewardTransaction, error) {
	return s.all(ctx, s.Pool, site)
}

func (s *Store) all(ctx context.Context, q querier, site Site) ([]flexv1.RewardTransaction, error) {
	rows, err := q.Query(ctx, selectTransactions+` WHERE t.organisation = $1 AND t.site_id = $2`, site.Namespace, site.ID)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	txs, err := scanTransactions(rows)
	return txs, s.classify(err)
}

// Revision is how many changes the site's history has had (transactions appended, withdrawal
// status changes recorded; 0 when none): it only grows, and a history read after it holds at
// least those changes (the database counts them as they commit).
func (s *Store) Revision(ctx context.Context, site Site) (int64, error) {
	var rev int64
	err := s.Pool.QueryRow(ctx, `SELECT coalesce((SELECT revision FROM reward_sites WHERE organisation = $1 AND site_id = $2), 0)`,
		site.Namespace, site.ID).Scan(&rev)
	return rev, s.classify(err)
}

// SitesWithHistory is every site the database holds reward history of. After a listening
// connection was lost, a ledger resync reconciles each: a site whose first credit's
// notification was missed meanwhile has no RewardLedger yet, so listing the ledgers alone
// would never find it.
func (s *Store) SitesWithHistory(ctx context.Context) ([]Site, error) {
	rows, err := s.Pool.Query(ctx, `SELECT organisation, site_id FROM reward_sites`)
	if err != nil {
		return nil, s.classify(err)
	}
	sites, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Site, error) {
		var site Site
		err := row.Scan(&site.Namespace, &site.ID)
		return site, err
	})
	return sites, s.classify(err)
}

// Page asks for part of a site's history, newest first.
type Page struct {
	Limit, Offset int
	// Since and Until bound when the transactions happened (zero: unbounded): Since inclusive,
	// Until exclusive.
	Since, Until time.Time
}

// Page is part of a site's history, newest first (ties by id), from the database.
func (s *Store) Page(ctx context.Context, site Site, p Page) ([]flexv1.RewardTransaction, error) {
	var since, until *time.Time
	if !p.Since.IsZero() {
		since = &p.Since
	}
	if !p.Until.IsZero() {
		until = &p.Until
	}
	txs, err := page(ctx, s.Pool, site, since, until, p.Limit, p.Offset)
	return txs, s.classify(err)
}

func page(ctx context.Context, q querier, site Site, since, until *time.Time, limit, offset int) (
	[]flexv1.RewardTransaction, error) {
	rows, err := q.Query(ctx, selectTransactions+` WHERE t.organisation = $1 AND t.site_id = $2
		AND ($3::timestamptz IS NULL OR t.occurred_at >= $3) AND ($4::timestamptz IS NULL OR t.occurred_at < $4)
		ORDER BY t.occurred_at DESC NULLS LAST, t.transaction_id LIMIT $5 OFFSET $6`,
		site.Namespace, site.ID, since, until, limit, offset)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	return scanTransactions(rows)
}

// Withdraw appends the withdrawal decide makes of the site's balance (Balance, read in the
// same SQL transaction), with the site's row locked from reading the balance to the commit:
// two withdrawals of one site are serialised, so the balance never goes below zero. The lock
// is FOR NO KEY UPDATE, the one every change of the history takes (the revision's trigger,
// migration 00011): a writer that holds the key-share lock of its foreign key and waits for it
// never deadlocks with this one.
func (s *Store) Withdraw(ctx context.Context, site Site,
	decide func(household.Balance) (flexv1.RewardTransaction, error)) (flexv1.RewardTransaction, error) {
	var out flexv1.RewardTransaction
	err := s.inTx(ctx, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, `INSERT INTO reward_sites (organisation, site_id) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
			site.Namespace, site.ID); err != nil {
			return err
		}
		if _, err := q.Exec(ctx, `SELECT 1 FROM reward_sites WHERE organisation = $1 AND site_id = $2 FOR NO KEY UPDATE`,
			site.Namespace, site.ID); err != nil {
			return err
		}
		b, err := balance(ctx, q, site)
		if err != nil {
			return err
		}
		if out, err = decide(b); err != nil {
			return err
		}
		_, _, err = s.append(ctx, q, site, out, SourceWithdrawal, true)
		return err
	})
	return out, err
}

// SetPaymentStatus moves a withdrawal's payment status to to, recording actor and the time,
// when the payment's state machine allows the step from its current status
// (household.PaymentChange); otherwise it answers the *household.PaymentChangeRefused and
// records nothing (the same status again included). The site's row is locked, as a withdrawal
// locks it, from reading the current status to the commit: two changes of one withdrawal are
// judged one after the other, never both against the same status, and the balance a withdrawal
// sees includes the change or not, never half of it.
func (s *Store) SetPaymentStatus(ctx context.Context, site Site, id string, to flexv1.PaymentStatus, actor string) (
	flexv1.RewardTransaction, error) {
	var out flexv1.RewardTransaction
	err := s.inTx(ctx, func(q pgx.Tx) error {
		if _, err := q.Exec(ctx, `SELECT 1 FROM reward_sites WHERE organisation = $1 AND site_id = $2 FOR NO KEY UPDATE`,
			site.Namespace, site.ID); err != nil {
			return err
		}
		tx, err := s.get(ctx, q, site, id)
		if err != nil {
			return err
		}
		if tx.Type != household.TransactionWithdrawal {
			return ErrNotWithdrawal
		}
		if err := household.PaymentChange(tx.PaymentStatus, to); err != nil {
			return err
		}
		out = tx
		if _, err := q.Exec(ctx, `INSERT INTO withdrawal_status_changes (organisation, site_id, transaction_id, from_status,
			to_status, actor) VALUES ($1, $2, $3, $4, $5, $6)`,
			site.Namespace, site.ID, id, string(tx.PaymentStatus), string(to), actor); err != nil {
			return err
		}
		out.PaymentStatus = to
		return s.notify(ctx, q, site)
	})
	return out, err
}

// StatusChange is one recorded change of a withdrawal's payment status.
type StatusChange struct {
	From, To flexv1.PaymentStatus
	Actor    string
	At       time.Time
}

// StatusChanges are a withdrawal's payment status changes, oldest first.
func (s *Store) StatusChanges(ctx context.Context, site Site, id string) ([]StatusChange, error) {
	rows, err := s.Pool.Query(ctx, `SELECT from_status, to_status, actor, changed_at FROM withdrawal_status_changes
		WHERE organisation = $1 AND site_id = $2 AND transaction_id = $3 ORDER BY seq`, site.Namespace, site.ID, id)
	if err != nil {
		return nil, s.classify(err)
	}
	defer rows.Close()
	var out []StatusChange
	for rows.Next() {
		var c StatusChange
		var from, to string
		if err := rows.Scan(&from, &to, &c.Actor, &c.At); err != nil {
			return nil, s.classify(err)
		}
		c.From, c.To = flexv1.PaymentStatus(from), flexv1.PaymentStatus(to)
		out = append(out, c)
	}
	return out, s.classify(rows.Err())
}

// Get is one transaction of the site, with its current payment status (db.ErrNotFound when none).
func (s *Store) Get(ctx context.Context, site Site, id string) (flexv1.RewardTransaction, error) {
	tx, err := s.get(ctx, s.Pool, site, id)
	return tx, s.classify(err)
}

// undoneStatuses are the payment statuses in which a withdrawal paid nothing out
// (household.PaymentUndone), for the balance's SQL.
func undoneStatuses() []string {
	var out []string
	for _, s := range household.PaymentStatuses {
		if household.PaymentUndone(s) {
			out = append(out, string(s))
		}
	}
	return out
}

// inBigint is a sum of bigints (numeric in PostgreSQL, never overflowing) held within a
// bigint's range before it is cast: each credit is bounded (household.MaxTransactionPence), so
// a real site's sums never reach the bounds, and a site's balance stays readable even then.
func inBigint(sum string) string {
	return `least(greatest(` + sum + `, -9223372036854775808), 9223372036854775807)::bigint`
}

// Balance is a site's balance, summed by the database from its whole history: the one place
// the sum is written (the REST API, /info, the rewards page, the RewardLedger summary and
// withdrawals all read it here). Withdrawals that paid nothing out (household.PaymentUndone)
// are not counted; earnings are the positive transactions that are not withdrawals; the first
// reward is the earliest of those.
func (s *Store) Balance(ctx context.Context, site Site) (household.Balance, error) {
	b, err := balance(ctx, s.Pool, site)
	return b, s.classify(err)
}

// rowQuerier is a pool or an SQL transaction.
type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func balance(ctx context.Context, q rowQuerier, site Site) (household.Balance, error) {
	var b household.Balance
	var first pgtype.Timestamptz
	err := q.QueryRow(ctx, `WITH history AS (`+siteHistory+`) `+sumBalance,
		site.Namespace, site.ID, undoneStatuses()).Scan(&b.Current, &b.Earnings, &first)
	if err != nil {
		return b, err
	}
	setFirstReward(&b, first)
	return b, nil
}

// siteHistory is the site ($1, $2)'s whole history, each transaction with its current payment
// status: what the balance is summed from (sumBalance), and what a page is cut from
// (PageWithBalance).
const siteHistory = `SELECT t.transaction_id, t.transaction_type, t.credit_pence, t.flex_wh, t.start_at, t.end_at,
		t.settlement_date, t.occurred_at, ` + currentStatus + ` AS status
	FROM reward_transactions t WHERE t.organisation = $1 AND t.site_id = $2`

// sumBalance is the balance's sum over history (siteHistory), the one place it is written:
// its current balance, total earnings and first reward, with $3 the statuses in which a
// withdrawal paid nothing out (undoneStatuses).
var sumBalance = `SELECT ` + inBigint(`coalesce(sum(credit_pence), 0)`) + ` AS current,
		` + inBigint(`coalesce(sum(credit_pence) FILTER (WHERE transaction_type <> 'withdrawal' AND credit_pence > 0), 0)`) + ` AS earnings,
		min(occurred_at) FILTER (WHERE transaction_type <> 'withdrawal' AND credit_pence > 0) AS first_reward
	FROM history WHERE NOT (status = ANY($3))`

func setFirstReward(b *household.Balance, first pgtype.Timestamptz) {
	if first.Valid {
		t := first.Time.UTC()
		b.FirstReward = &t
	}
}

// Summary is what a RewardLedger's status shows of a site's history, read in one snapshot.
type Summary struct {
	// Balance is Balance's sum.
	Balance household.Balance
	// Revision is Revision's count: the summary holds exactly the changes it counts.
	Revision int64
	// Count is how many transactions the history holds.
	Count int64
	// LastCredited is when the newest credit (not a withdrawal) happened (nil: none).
	LastCredited *time.Time
	// Recent are the newest transactions, newest first (Page's order).
	Recent []flexv1.RewardTransaction
}

// Summary is the site's Summary with its recent newest transactions, every figure read in one
// snapshot of the database (a read-only, repeatable-read SQL transaction).
func (s *Store) Summary(ctx context.Context, site Site, recent int) (Summary, error) {
	var out Summary
	err := pgx.BeginTxFunc(ctx, s.Pool, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly},
		func(q pgx.Tx) error {
			var last *time.Time
			if err := q.QueryRow(ctx, `SELECT
					coalesce((SELECT revision FROM reward_sites WHERE organisation = $1 AND site_id = $2), 0),
					(SELECT count(*) FROM reward_transactions WHERE organisation = $1 AND site_id = $2),
					(SELECT max(occurred_at) FROM reward_transactions WHERE organisation = $1 AND site_id = $2
						AND transaction_type <> 'withdrawal' AND credit_pence > 0)`,
				site.Namespace, site.ID).Scan(&out.Revision, &out.Count, &last); err != nil {
				return err
			}
			if last != nil {
				t := last.UTC()
				out.LastCredited = &t
			}
			var err error
			if out.Balance, err = balance(ctx, q, site); err != nil {
				return err
			}
			out.Recent, err = page(ctx, q, site, nil, nil, recent, 0)
			return err
		})
	return out, s.classify(err)
}
