package dispatchstore_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// trips keeps what a pool sent, one entry a round trip: a statement's first word, or "batch".
type trips struct {
	mu   sync.Mutex
	sent []string
}

func (t *trips) add(s string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sent = append(t.sent, s)
}

func (t *trips) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	t.add(strings.ToLower(strings.Fields(data.SQL)[0]))
	return ctx
}
func (t *trips) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (t *trips) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	t.add("batch")
	return ctx
}
func (t *trips) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (t *trips) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// An issuing transaction holds back every organisation's notifications from its first write
// to its commit (the delivery horizon), and each round trip inside it waits for the manager
// too: a transaction of dispatches and skips makes at most two between its BEGIN and its
// COMMIT (the dispatches, the skips and the NOTIFY in one pipeline; then the outbox's, when any
// dispatch is new), and writes what it wrote before (each dispatch once, its skip only when not dispatched).
func TestIssueTransactionMakesAtMostTwoRoundTrips(t *testing.T) {
	ctx := context.Background()
	cfg, err := pgxpool.ParseConfig(testDB.URL)
	if err != nil {
		t.Fatal(err)
	}
	traced := &trips{}
	cfg.ConnConfig.Tracer = traced
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	s := &dispatchstore.Store{Pool: pool}
	const org = "org-round-trips"
	ds := dispatches("fe-trips", 100)
	skips := []dispatchstore.Skip{
		{FlexEvent: "fe-trips", SiteID: "site-x", AssetID: "asset-x", Reason: dispatch.NotPluggedIn},
		// dispatched in the same call: not recorded as skipped.
		{FlexEvent: "fe-trips", SiteID: "site-3", AssetID: "asset-3", Reason: dispatch.NotPluggedIn},
	}
	for round := range 2 {
		traced.mu.Lock()
		traced.sent = nil
		traced.mu.Unlock()
		n, err := s.Issue(ctx, org, "https://flexsite.test", ds, skips, start)
		if err != nil {
			t.Fatal(err)
		}
		if want := []int{100, 0}[round]; n != want {
			t.Errorf("round %d issued %d, want %d", round, n, want)
		}
		traced.mu.Lock()
		sent := traced.sent
		traced.mu.Unlock()
		begin, commit := -1, -1
		for i, s := range sent {
			switch s {
			case "begin":
				begin = i
			case "commit":
				commit = i
			}
		}
		if begin < 0 || commit < begin || commit-begin-1 > 2 {
			t.Errorf("round %d: the issuing transaction's round trips %v, want begin, at most two, commit", round, sent)
		}
	}
	if n := count(t, `SELECT count(*) FROM dispatches WHERE organisation = $1`, org); n != 100 {
		t.Errorf("%d dispatches, want 100", n)
	}
	if n := count(t, `SELECT count(*) FROM outbox WHERE organisation = $1`, org); n != 100 {
		t.Errorf("%d events, want 100", n)
	}
	if n := count(t, `SELECT count(*) FROM dispatch_skips WHERE organisation = $1`, org); n != 1 {
		t.Errorf("%d skips, want 1 (asset-x's)", n)
	}
}
