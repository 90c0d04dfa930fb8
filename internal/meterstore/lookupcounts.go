package meterstore

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/meters"
)

// LookupCounts counts the register's lookups in their budget windows (migration 00026,
// meters.Budgets), in PostgreSQL so that every replica counts in the same windows.
type LookupCounts struct {
	Pool *pgxpool.Pool
}

// countLookup counts a lookup in its windows in one statement, when none of them is spent
// already (a refused lookup counts in none, so retries while refused spend nothing): the
// counts as they were, and, when none was spent, one more in each (the rows locked in the
// counters' order, the same in every call). It answers each window's count with this lookup
// counted: the new count when counted, the old one plus one otherwise.
const countLookup = `
WITH wanted AS (
	SELECT w.household, w.span_seconds, w.window_start, w.lim, w.i
	FROM unnest($2::text[], $3::integer[], $4::timestamptz[], $5::bigint[]) WITH ORDINALITY
		AS w(household, span_seconds, window_start, lim, i)
), before AS (
	SELECT w.i, coalesce(c.n, 0) AS n, w.lim
	FROM wanted w LEFT JOIN meter_lookup_counts c ON c.organisation = $1 AND c.household = w.household
		AND c.span_seconds = w.span_seconds AND c.window_start = w.window_start
), counted AS (
	INSERT INTO meter_lookup_counts AS c (organisation, household, span_seconds, window_start, n)
	SELECT $1, household, span_seconds, window_start, 1 FROM wanted
	WHERE NOT EXISTS (SELECT 1 FROM before WHERE n >= lim)
	ORDER BY i
	ON CONFLICT (organisation, household, span_seconds, window_start) DO UPDATE SET n = c.n + 1
	RETURNING c.household, c.span_seconds, c.n
)
SELECT coalesce(k.n, b.n + 1), k.n IS NOT NULL
FROM wanted w JOIN before b ON b.i = w.i
	LEFT JOIN counted k ON k.household = w.household AND k.span_seconds = w.span_seconds
ORDER BY w.i`

// Count counts one lookup of organisation in counters' windows (meters.Budgets.Counters) and
// answers each window's count with it counted, for meters.Judge. A lookup that begins a window
// also deletes the windows that ended (the organisation's when it begins one of the
// organisation's, else the household's): no sweep is needed, and the table stays small. That
// deletion failing is not the lookup's failure: the next window's first lookup tries again.
func (s *LookupCounts) Count(ctx context.Context, organisation string, counters []meters.Counter, now time.Time) ([]int64, error) {
	if len(counters) == 0 {
		return nil, nil
	}
	households := make([]string, len(counters))
	spans := make([]int32, len(counters))
	starts := make([]time.Time, len(counters))
	limits := make([]int64, len(counters))
	for i, c := range counters {
		span := int32(c.Span / time.Second) //nolint:gosec // an hour or a day
		households[i], spans[i], starts[i], limits[i] = c.Household, span, c.Start, c.Limit
	}
	rows, err := s.Pool.Query(ctx, countLookup, organisation, households, spans, starts, limits)
	if err != nil {
		return nil, db.ClassifyOn(s.Pool, err)
	}
	defer rows.Close()
	counts := make([]int64, 0, len(counters))
	began := -1 // the first window this lookup began
	for rows.Next() {
		var n int64
		var counted bool
		if err := rows.Scan(&n, &counted); err != nil {
			return nil, db.ClassifyOn(s.Pool, err)
		}
		if counted && n == 1 && began < 0 {
			began = len(counts)
		}
		counts = append(counts, n)
	}
	if err := rows.Err(); err != nil {
		return nil, db.ClassifyOn(s.Pool, err)
	}
	if began >= 0 {
		_ = s.DeleteEnded(ctx, organisation, counters[began].Household, now)
	}
	return counts, nil
}

// DeleteEnded deletes the organisation's windows that ended by now: all of them (household "")
// or one household's.
func (s *LookupCounts) DeleteEnded(ctx context.Context, organisation, household string, now time.Time) error {
	_, err := s.Pool.Exec(ctx, `DELETE FROM meter_lookup_counts WHERE organisation = $1
		AND ($2 = '' OR household = $2) AND window_start + make_interval(secs => span_seconds) <= $3`,
		organisation, household, now)
	return db.ClassifyOn(s.Pool, err)
}
