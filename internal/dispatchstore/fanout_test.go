package dispatchstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// subscribers owes every event type to its uids, and keeps what it was told was committed.
type subscribers struct {
	uids []string

	mu        sync.Mutex
	asked     []flexv1.EventType
	committed [][]string
}

func (s *subscribers) SubscribersOf(_ context.Context, _ string, t flexv1.EventType) ([]string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked = append(s.asked, t)
	return s.uids, true
}

func (s *subscribers) Committed(uids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed = append(s.committed, slices.Clone(uids))
}

// With the subscriptions known, a burst's delivery rows are committed with its dispatches: when
// Issue returns, each dispatch.requested has a pending delivery row for each subscription and is
// fanned out already (no fan-out pass stands between the commit and the claims), and the
// subscriptions are told. A dispatch issued again gets no second row; Cancel's events get theirs
// the same way.
func TestIssueWritesDeliveryRowsInItsTransaction(t *testing.T) {
	ctx := context.Background()
	subs := &subscribers{uids: []string{"sub-1", "sub-2"}}
	s := &dispatchstore.Store{Pool: testDB.Pool, Subscribers: subs}
	const org = "org-inline"
	ds := dispatches("burst", 1000)
	if n, err := s.Issue(ctx, org, "https://flexsite.example", ds, nil, start.Add(-time.Hour)); err != nil || n != 1000 {
		t.Fatalf("Issue = %d, %v", n, err)
	}
	deliveries := func(typ flexv1.EventType) int {
		return count(t, `SELECT count(*) FROM notification_deliveries d JOIN outbox o ON o.id = d.event_seq
			WHERE o.organisation = $1 AND o.event_type = $2 AND d.state = 'pending' AND d.event_xid = o.xid
				AND d.site_id = o.site_id AND d.event_at = o.created_at`, org, string(typ))
	}
	if n := deliveries(flexv1.EventDispatchRequested); n != 2000 {
		t.Errorf("%d pending deliveries of dispatch.requested when Issue returned, want 2,000 (1,000 for each subscription)", n)
	}
	if n := count(t, `SELECT count(*) FROM outbox WHERE organisation = $1 AND fanned_out_at IS NULL`, org); n != 0 {
		t.Errorf("%d events left to the fan-out", n)
	}
	if n, err := s.Issue(ctx, org, "https://flexsite.example", ds[:10], nil, start.Add(-time.Hour)); err != nil || n != 0 {
		t.Fatalf("Issue again = %d, %v", n, err)
	}
	if n := deliveries(flexv1.EventDispatchRequested); n != 2000 {
		t.Errorf("%d deliveries after issuing again, want 2,000", n)
	}
	if n, err := s.Cancel(ctx, org, "burst", start); err != nil || n != 1000 {
		t.Fatalf("Cancel = %d, %v", n, err)
	}
	if n := deliveries(flexv1.EventDispatchCancelled); n != 2000 {
		t.Errorf("%d pending deliveries of dispatch.cancelled, want 2,000", n)
	}
	subs.mu.Lock()
	defer subs.mu.Unlock()
	// The issue's four transactions (125, 250, 500 and 125 dispatches) and the cancellation.
	if want := [][]string{subs.uids, subs.uids, subs.uids, subs.uids, subs.uids}; !slices.EqualFunc(subs.committed, want, slices.Equal) {
		t.Errorf("told committed %v, want %v (each of the issue's transactions and the cancellation; nothing for the issue that issued nothing)",
			subs.committed, want)
	}
}

// firstCommitted keeps, when it is first told of a commit, how many of the organisation's
// dispatch.requested deliveries are committed by then.
type firstCommitted struct {
	subscribers
	org   string
	first int
}

func (s *firstCommitted) Committed(uids []string) {
	s.subscribers.Committed(uids)
	if s.first < 0 {
		if err := testDB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM notification_deliveries WHERE organisation = $1`,
			s.org).Scan(&s.first); err != nil {
			panic(err)
		}
	}
}

// A burst's first dispatches are committed, with their delivery rows, and their subscriptions
// told, while the rest are still to be issued: delivery begins after the first transaction's
// 125, not after the whole first thousand.
func TestIssueCommitsTheFirstDispatchesFirst(t *testing.T) {
	ctx := context.Background()
	const org = "org-first"
	subs := &firstCommitted{subscribers: subscribers{uids: []string{"sub-1"}}, org: org, first: -1}
	s := &dispatchstore.Store{Pool: testDB.Pool, Subscribers: subs}
	if n, err := s.Issue(ctx, org, "https://flexsite.example", dispatches("burst", 1000), nil, start.Add(-time.Hour)); err != nil || n != 1000 {
		t.Fatalf("Issue = %d, %v", n, err)
	}
	if subs.first != 125 {
		t.Errorf("%d deliveries committed when the subscriptions were first told, want the first transaction's 125", subs.first)
	}
	if n := count(t, `SELECT count(*) FROM notification_deliveries WHERE organisation = $1`, org); n != 1000 {
		t.Errorf("%d deliveries in all, want 1,000", n)
	}
}

// Without Subscribers the events are left to the fan-out, as before.
func TestIssueWithoutSubscribersLeavesTheFanOut(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org = "org-fanout"
	if n, err := s.Issue(ctx, org, "https://flexsite.example", dispatches("ev", 3), nil, start.Add(-time.Hour)); err != nil || n != 3 {
		t.Fatalf("Issue = %d, %v", n, err)
	}
	if n := count(t, `SELECT count(*) FROM outbox WHERE organisation = $1 AND fanned_out_at IS NULL`, org); n != 3 {
		t.Errorf("%d events left to the fan-out, want 3", n)
	}
	if n := count(t, `SELECT count(*) FROM notification_deliveries WHERE organisation = $1`, org); n != 0 {
		t.Errorf("%d delivery rows written by the issuer without subscribers", n)
	}
}
