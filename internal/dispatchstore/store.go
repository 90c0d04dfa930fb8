// Package dispatchstore is dispatch's part of the database (migration 00017): each dispatch of
// a flex event to an asset, issued exactly once with its dispatch.requested outbox event in one
// SQL transaction; every change of its status, kept append-only with who and when, judged by
// internal/dispatch's state machine under the dispatch row's lock; the assets skipped and why;
// and the counts a FlexEvent's status, GET /flex-events/{id} and a site's flex events show.
//
// Every change NOTIFYs Channel with "<organisation>/<flex event>", so the FlexEvent
// controller of any replica copies the new counts into the event's status at once (a
// reported status's NOTIFY follows its commit, coalesced per flex event: Record).
package dispatchstore

import (
	"context"
	"sync"

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
	// pending are the flex events whose NOTIFY is on its way (notifySoon).
	pending sync.Map
}

func (s *Store) classify(err error) error { return db.ClassifyOn(s.Pool, err) }

// Counts are the dispatches of one flex event by state, and its skipped assets by reason, in
// one snapshot.
func (s *Store) Counts(ctx context.Context, organisation, flexEvent string) (dispatch.Counts, error) {
	all, err := s.CountsOf(ctx, organisation, []string{flexEvent})
	return all[flexEvent], err
}

// CountsOf are the counts of each of an organisation's flex events (a page of them), in one
// query: every event named has an entry, empty when nothing was issued or skipped for it.
func (s *Store) CountsOf(ctx context.Context, organisation string, flexEvents []string) (map[string]dispatch.Counts, error) {
	out := make(map[string]dispatch.Counts, len(flexEvents))
	for _, e := range flexEvents {
		out[e] = emptyCounts()
	}
	if len(flexEvents) == 0 {
		return out, nil
	}
	return out, s.scanCounts(ctx, out, `
		SELECT flex_event, 'status', status, count(*)::int FROM dispatches
		WHERE organisation = $1 AND flex_event = ANY($2) GROUP BY flex_event, status
		UNION ALL
		SELECT flex_event, 'skip', reason, count(*)::int FROM dispatch_skips
		WHERE organisation = $1 AND flex_event = ANY($2) GROUP BY flex_event, reason`, organisation, flexEvents)
}

// CountsOfSite are, for each flex event that asked (or skipped) an asset of an organisation's
// site, that site's share of its counts, in one query. An event absent from the map has none.
func (s *Store) CountsOfSite(ctx context.Context, organisation, siteID string) (map[string]dispatch.Counts, error) {
	out := map[string]dispatch.Counts{}
	return out, s.scanCounts(ctx, out, `
		SELECT flex_event, 'status', status, count(*)::int FROM dispatches
		WHERE organisation = $1 AND site_id = $2 GROUP BY flex_event, status
		UNION ALL
		SELECT flex_event, 'skip', reason, count(*)::int FROM dispatch_skips
		WHERE organisation = $1 AND site_id = $2 GROUP BY flex_event, reason`, organisation, siteID)
}

func emptyCounts() dispatch.Counts {
	return dispatch.Counts{ByStatus: map[dispatch.Status]int32{}, Skipped: map[dispatch.SkipReason]int32{}}
}

// scanCounts adds the rows (flex event, 'status' | 'skip', key, count) of query to out.
func (s *Store) scanCounts(ctx context.Context, out map[string]dispatch.Counts, query string, args ...any) error {
	rows, err := s.Pool.Query(ctx, query, args...)
	if err != nil {
		return s.classify(err)
	}
	defer rows.Close()
	for rows.Next() {
		var flexEvent, kind, key string
		var n int32
		if err := rows.Scan(&flexEvent, &kind, &key, &n); err != nil {
			return s.classify(err)
		}
		c, ok := out[flexEvent]
		if !ok {
			c = emptyCounts()
			out[flexEvent] = c
		}
		if kind == "status" {
			c.ByStatus[dispatch.Status(key)] = n
		} else {
			c.Skipped[dispatch.SkipReason(key)] = n
		}
	}
	return s.classify(rows.Err())
}
