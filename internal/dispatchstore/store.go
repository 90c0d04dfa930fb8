// Package dispatchstore is dispatch's part of the database (migration 00017): each dispatch of
// a flex event to an asset, issued exactly once with its dispatch.requested outbox event (and,
// with Subscribers, the event's delivery rows) in one SQL transaction; every change of its
// status, kept append-only with who and when, judged by internal/dispatch's state machine under
// the dispatch row's lock; the assets skipped and why; and the counts a FlexEvent's status,
// GET /flex-events/{id} and a site's flex events show.
//
// Every change NOTIFYs Channel with "<organisation>/<flex event>", so the FlexEvent
// controller of any replica copies the new counts into the event's status at once (a
// reported status's NOTIFY follows its commit, coalesced per flex event: Record).
package dispatchstore

import (
	"context"
	"sync"

	"github.com/jackc/pgx/v5/pgxpool"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// Channel is the PostgreSQL NOTIFY channel of dispatch changes; the payload is
// "<organisation>/<flex event>".
const Channel = "flexsite_dispatches"

// Store reads and writes dispatches.
type Store struct {
	Pool *pgxpool.Pool
	// Subscribers, when set, names the subscriptions a dispatch's events are owed: issuing and
	// cancelling then write the events' delivery rows in their own transaction, and tell it
	// once committed, so that delivery starts at the commit with no fan-out pass between
	// (docs/notifications.md, "How it works (for operators)"). Unset: the deliverers fan the
	// events out after the commit.
	Subscribers Subscribers
	// pending are the flex events whose NOTIFY is on its way (notifySoon).
	pending sync.Map
}

// Subscribers are the subscriptions an organisation's events are owed (the deliverer's rule,
// internal/delivery), and what to tell once their delivery rows are committed.
type Subscribers interface {
	// SubscribersOf answers the subscriptions of the organisation owed events of type t; ok is
	// false when it cannot tell (the events are then fanned out after the commit).
	SubscribersOf(ctx context.Context, organisation string, t flexv1.EventType) (uids []string, ok bool)
	// Committed is told the subscriptions given delivery rows, once they are committed.
	Committed(uids []string)
}

// subscribersOf asks s.Subscribers, when set.
func (s *Store) subscribersOf(ctx context.Context, organisation string, t flexv1.EventType) outboxstore.Subscribers {
	if s.Subscribers == nil {
		return outboxstore.Subscribers{}
	}
	uids, ok := s.Subscribers.SubscribersOf(ctx, organisation, t)
	return outboxstore.Subscribers{Known: ok, UIDs: uids}
}

// committed tells s.Subscribers which subscriptions were given delivery rows.
func (s *Store) committed(to outboxstore.Subscribers, wrote bool) {
	if wrote && to.Known && len(to.UIDs) > 0 {
		s.Subscribers.Committed(to.UIDs)
	}
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
