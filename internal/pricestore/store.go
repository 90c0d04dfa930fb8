// Package pricestore keeps an organisation's half-hourly market prices in PostgreSQL (migration
// 00019): a UK local day declared whole and replaced whole in one SQL transaction, read back
// by day, and read over a price curve's horizon. The rules (what a day is, two decimals, the
// horizon) are internal/prices'.
package pricestore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/prices"
)

// Store reads and writes market prices.
type Store struct {
	Pool *pgxpool.Pool
}

func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// Declared is a declared day: its prices in period order, when and by whom it was last
// declared.
type Declared struct {
	Prices    []prices.Price
	UpdatedAt time.Time
	UpdatedBy string
}

// Put declares a day's prices (already checked: prices.CheckDay), replacing what was declared
// for it, in one SQL transaction. It reports whether the day was declared before.
func (s *Store) Put(ctx context.Context, organisation, market string, day prices.Day, ps []prices.Price,
	by string, now time.Time) (replaced bool, err error) {
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		// The day's rows are locked (or, for a first declaration, the day serialised by the
		// advisory lock), so two declarations of one day never interleave their rows.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended($1 || '/' || $2 || '/' || $3, 19))`,
			organisation, market, day.String()); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `DELETE FROM market_prices WHERE organisation = $1 AND market = $2 AND day = $3`,
			organisation, market, day.String())
		if err != nil {
			return err
		}
		replaced = tag.RowsAffected() > 0
		starts := make([]time.Time, len(ps))
		centis := make([]int64, len(ps))
		for i, p := range ps {
			starts[i], centis[i] = p.Start, int64(p.Centi)
		}
		_, err = tx.Exec(ctx, `INSERT INTO market_prices (organisation, market, day, start_at, price_centi, updated_at, updated_by)
			SELECT $1, $2, $3::date, s, c, $6, $7 FROM unnest($4::timestamptz[], $5::bigint[]) AS u(s, c)`,
			organisation, market, day.String(), starts, centis, now, by)
		if err != nil {
			return err
		}
		return notifyChanged(ctx, tx, organisation, market)
	})
	return replaced, s.classify(err)
}

// Day reads a declared day; ok is false when it was never declared.
func (s *Store) Day(ctx context.Context, organisation, market string, day prices.Day) (d Declared, ok bool, err error) {
	rows, err := s.Pool.Query(ctx, `SELECT start_at, price_centi, updated_at, updated_by FROM market_prices
		WHERE organisation = $1 AND market = $2 AND day = $3 ORDER BY start_at`, organisation, market, day.String())
	if err != nil {
		return d, false, s.classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var p prices.Price
		var c int64
		if err := rows.Scan(&p.Start, &c, &d.UpdatedAt, &d.UpdatedBy); err != nil {
			return d, false, s.classify(err)
		}
		p.Centi = prices.Centi(c)
		d.Prices = append(d.Prices, p)
	}
	return d, len(d.Prices) > 0, s.classify(rows.Err())
}

// Span is what the prices of a span hold: the declared prices in [from, to) in period order,
// when any of the span's days was last declared (zero when none), and whether the day named
// by the read (Range's tomorrow) is declared.
type Span struct {
	Prices      []prices.Price
	LastChanged time.Time
	DayDeclared bool
}

// Range reads the prices declared in [from, to) and whether day is declared, in one query.
func (s *Store) Range(ctx context.Context, organisation, market string, from, to time.Time, day prices.Day) (Span, error) {
	var out Span
	rows, err := s.Pool.Query(ctx, `SELECT start_at, price_centi, updated_at FROM market_prices
		WHERE organisation = $1 AND market = $2 AND start_at >= $3 AND start_at < $4
		UNION ALL
		SELECT NULL, NULL, NULL WHERE EXISTS (SELECT 1 FROM market_prices
			WHERE organisation = $1 AND market = $2 AND day = $5)
		ORDER BY 1 NULLS LAST`, organisation, market, from, to, day.String())
	if err != nil {
		return out, s.classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var start, updated *time.Time
		var c *int64
		if err := rows.Scan(&start, &c, &updated); err != nil {
			return out, s.classify(err)
		}
		if start == nil {
			out.DayDeclared = true
			continue
		}
		out.Prices = append(out.Prices, prices.Price{Start: *start, Centi: prices.Centi(*c)})
		if updated.After(out.LastChanged) {
			out.LastChanged = *updated
		}
	}
	return out, s.classify(rows.Err())
}
