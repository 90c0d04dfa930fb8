// Package dispatchstore is dispatch's part of the database (migration 00017): each dispatch of
// a flex event to an asset, issued exactly once with its dispatch.requested outbox event in one
// SQL transaction; every change of its status, kept append-only with who and when, judged by
// internal/dispatch's state machine under the dispatch row's lock; the assets skipped and why;
// and the counts a FlexEvent's status, GET /flex-events/{id} and a site's flex events show.
//
// Every change NOTIFYs Channel with "<organisation>/<flex event>", so the FlexEvent
// controller of any replica copies the new counts into the event's status at once.
package dispatchstore

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
)

// Channel is the PostgreSQL NOTIFY channel of dispatch changes; the payload is
// "<organisation>/<flex event>".
const Channel = "flexsite_dispatches"

// Store reads and writes dispatches.
type Store struct {
	Pool *pgxpool.Pool
}

func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// Counts are the dispatches of one flex event by state, and its skipped assets by reason, in
// one snapshot.
func (s *Store) Counts(ctx context.Context, organisation, flexEvent string) (dispatch.Counts, error) {
	out := dispatch.Counts{ByStatus: map[dispatch.Status]int32{}, Skipped: map[dispatch.SkipReason]int32{}}
	rows, err := s.Pool.Query(ctx, `
		SELECT 'status', status, count(*)::int FROM dispatches WHERE organisation = $1 AND flex_event = $2 GROUP BY status
		UNION ALL
		SELECT 'skip', reason, count(*)::int FROM dispatch_skips WHERE organisation = $1 AND flex_event = $2 GROUP BY reason`,
		organisation, flexEvent)
	if err != nil {
		return out, s.classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind, key string
		var n int32
		if err := rows.Scan(&kind, &key, &n); err != nil {
			return out, s.classify(err)
		}
		if kind == "status" {
			out.ByStatus[dispatch.Status(key)] = n
		} else {
			out.Skipped[dispatch.SkipReason(key)] = n
		}
	}
	return out, s.classify(rows.Err())
}
