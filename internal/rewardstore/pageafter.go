package rewardstore

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Position is a transaction's place in the statement order (newest first, ties by id, the
// transactions that never said when they happened last): where PageAfter carries on.
type Position struct {
	Occurred    time.Time
	HasOccurred bool
	ID          [16]byte
}

// pageRowColumns are a history row as PageAfter scans it (its statements' select list).
const pageRowColumns = `SELECT t.transaction_id, t.transaction_type, t.credit_pence, t.flex_wh, t.start_at, t.end_at,
	t.settlement_date, ` + currentStatus + `, t.occurred_at
	FROM reward_transactions t WHERE t.organisation = $1 AND t.site_id = $2`

// afterDated is the batch after a dated position ($5, $6): the rest of its second, then the
// seconds before it. `occurred_at <= $5` is where the scan of the statement index starts
// (reward_transactions_statement), so a batch costs its own rows, not the rows before it;
// the transactions without a time are afterUndated's.
const afterDated = pageRowColumns + `
	AND ($3::timestamptz IS NULL OR t.occurred_at >= $3) AND ($4::timestamptz IS NULL OR t.occurred_at < $4)
	AND t.occurred_at <= $5 AND (t.occurred_at < $5 OR t.transaction_id > $6)
	ORDER BY t.occurred_at DESC NULLS LAST, t.transaction_id LIMIT $7`

// afterUndated is the batch of the transactions without a time after id $5 (all of them
// when $5 is NULL): the statement's end. A bounded query (since or until) has none.
const afterUndated = pageRowColumns + `
	AND t.occurred_at IS NULL AND $3::timestamptz IS NULL AND $4::timestamptz IS NULL
	AND ($5::uuid IS NULL OR t.transaction_id > $5)
	ORDER BY t.transaction_id LIMIT $6`

// PageAfter reads the next batch of a site's history after the transaction at after, in
// Page's order and within p's Since and Until: at most p.Limit transactions (p.Offset is
// not used), each given to row as PageWithBalance gives them; n is how many. A reader walks
// a history of any length a batch at a time this way (PageWithBalance's page first, then
// PageAfter from its last row's Position until a batch comes back short), holding one batch
// and no database connection between batches. Each batch is its own snapshot: a transaction
// written meanwhile is answered if it falls after the reader's position, and nothing already
// answered is answered again.
func (s *Store) PageAfter(ctx context.Context, site Site, p Page, after Position, row func(*PageRow)) (n int, err error) {
	n, err = s.pageAfter(ctx, site, p, after, row)
	return n, s.classify(err)
}

func (s *Store) pageAfter(ctx context.Context, site Site, p Page, after Position, row func(*PageRow)) (int, error) {
	var since, until *time.Time
	if !p.Since.IsZero() {
		since = &p.Since
	}
	if !p.Until.IsZero() {
		until = &p.Until
	}
	var sc batchScan
	id := pgtype.UUID{Bytes: after.ID, Valid: true}
	if after.HasOccurred {
		n, err := sc.read(ctx, s, afterDated, row, site.Namespace, site.ID, since, until, after.Occurred, id, p.Limit)
		if err != nil || n == p.Limit {
			return n, err
		}
		// The dated transactions are done: the undated ones follow, from the first.
		more, err := sc.read(ctx, s, afterUndated, row, site.Namespace, site.ID, since, until, pgtype.UUID{}, p.Limit-n)
		return n + more, err
	}
	return sc.read(ctx, s, afterUndated, row, site.Namespace, site.ID, since, until, id, p.Limit)
}

// batchScan scans history rows (pageRowColumns) into one PageRow, reused row after row: a
// batch allocates per batch, not per row, as PageWithBalance's page does.
type batchScan struct {
	dest                []any
	id                  pgtype.UUID
	typ, status         pgtype.DriverBytes
	credit, flex        pgtype.Int8
	start, end, at      pgtype.Timestamptz
	settlement          pgtype.Date
	r                   PageRow
	typText, statusText string
}

func (sc *batchScan) read(ctx context.Context, s *Store, sql string, row func(*PageRow), args ...any) (int, error) {
	if sc.dest == nil {
		sc.dest = []any{&sc.id, &sc.typ, &sc.credit, &sc.flex, &sc.start, &sc.end, &sc.settlement, &sc.status, &sc.at}
	}
	rows, err := s.Pool.Query(ctx, sql, args...)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		if err := rows.Scan(sc.dest...); err != nil {
			return n, err
		}
		if sc.settlement.Valid && sc.settlement.InfinityModifier != pgtype.Finite {
			return n, errors.New("a transaction's settlement date is infinite")
		}
		sc.r.scanned(sc.id, sameText(&sc.typText, sc.typ), sameText(&sc.statusText, sc.status), sc.credit, sc.flex, sc.start,
			sc.end, sc.settlement, sc.at)
		row(&sc.r)
		n++
	}
	return n, rows.Err()
}
