package dispatchstore_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// trips keeps what a pool sent, one entry a round trip: a statement's first word, or a batch's
// statements' first words joined by commas.
type trips struct {
	mu   sync.Mutex
	sent []string
}

func (t *trips) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent = append(t.sent, s)
}

func (t *trips) take() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := t.sent
	t.sent = nil
	return out
}

func firstWord(sql string) string { return strings.ToLower(strings.Fields(sql)[0]) }

func (t *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.add(firstWord(data.SQL))
	return ctx
}
func (t *trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceBatchStartData) context.Context {
	words := make([]string, 0, data.Batch.Len())
	for _, q := range data.Batch.QueuedQueries {
		words = append(words, firstWord(q.SQL))
	}
	t.add(strings.Join(words, ","))
	return ctx
}
func (t *trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An issuing transaction holds back every organisation's notifications from its first write
// to its commit (the delivery horizon), and the manager, under load, answers late: a
// transaction of dispatches and skips is two round trips, its BEGIN sent with the dispatches,
// the skips and the NOTIFY, and its COMMIT with the outbox's events (none when no dispatch is
// new), so that it waits for the manager once; and it writes what it wrote before (each
// dispatch once, its skip only when not dispatched).
func TestIssueTransactionIsTwoRoundTrips(t *testing.T) {
	ctx := context.Background()
	traced := &trips{}
	s := tracedStore(t, traced)
	const org = "org-round-trips"
	ds := dispatches("fe-trips", 100)
	skips := []dispatchstore.Skip{
		{FlexEvent: "fe-trips", SiteID: "site-x", AssetID: "asset-x", Reason: dispatch.NotPluggedIn},
		// dispatched in the same call: not recorded as skipped.
		{FlexEvent: "fe-trips", SiteID: "site-3", AssetID: "asset-3", Reason: dispatch.NotPluggedIn},
	}
	for round, want := range [][]string{{"begin,with,insert,select", "insert,commit"}, {"begin,with,insert,select", "commit"}} {
		traced.take()
		n, err := s.Issue(ctx, org, "https://flexsite.test", ds, skips, start)
		if err != nil {
			t.Fatal(err)
		}
		if wantN := []int{100, 0}[round]; n != wantN {
			t.Errorf("round %d issued %d, want %d", round, n, wantN)
		}
		if sent := traced.take(); !slices.Equal(sent, want) {
			t.Errorf("round %d: the issuing transaction's round trips %q, want %q", round, sent, want)
		}
	}
	// A transaction that fails is rolled back: nothing of it stays, and the next is issued.
	if _, err := s.Issue(ctx, org, "https://flexsite.test", []dispatchstore.Dispatch{{FlexEvent: "fe-trips-bad",
		SiteID: "site-bad", AssetID: "asset-bad\x00", MarketID: "m", From: start, To: start.Add(time.Hour),
		EventTimestamp: start}}, nil, start); err == nil {
		t.Error("a dispatch with a NUL in its asset was issued")
	}
	if n := count(t, `SELECT count(*) FROM dispatches WHERE organisation = $1 AND flex_event = 'fe-trips-bad'`, org); n != 0 {
		t.Errorf("%d dispatches of the failed transaction", n)
	}
	if n, err := s.Issue(ctx, org, "https://flexsite.test", dispatches("fe-trips-next", 1), nil, start); err != nil || n != 1 {
		t.Errorf("after a failed transaction: issued %d, %v", n, err)
	}
	if n := count(t, `SELECT count(*) FROM dispatches WHERE organisation = $1`, org); n != 101 {
		t.Errorf("%d dispatches, want 101", n)
	}
	if n := count(t, `SELECT count(*) FROM outbox WHERE organisation = $1`, org); n != 101 {
		t.Errorf("%d events, want 101", n)
	}
	if n := count(t, `SELECT count(*) FROM dispatch_skips WHERE organisation = $1`, org); n != 1 {
		t.Errorf("%d skips, want 1 (asset-x's)", n)
	}
}
