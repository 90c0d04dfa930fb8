package dispatchstore_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// statements keeps every statement a pool ran, with its arguments.
type statements struct {
	mu  sync.Mutex
	ran []ranStatement
}

type ranStatement struct {
	sql  string
	args []any
}

func (s *statements) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ran = append(s.ran, ranStatement{sql: data.SQL, args: slices.Clone(data.Args)})
	return ctx
}

func (s *statements) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (s *statements) take() []ranStatement {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.ran
	s.ran = nil
	return out
}

// plans answers a statement's plans: the generic one (what a prepared statement settles on
// after five runs) and the one made for its arguments.
func plans(t *testing.T, st ranStatement) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, mode := range []string{"force_generic_plan", "force_custom_plan"} {
		err := pgx.BeginFunc(ctx, testDB.Pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = `+mode); err != nil {
				return err
			}
			if _, err := tx.Prepare(ctx, "planned", st.sql); err != nil {
				return err
			}
			defer func() { _ = tx.Conn().Deallocate(ctx, "planned") }()
			params := make([]string, len(st.args))
			for i := range params {
				params[i] = fmt.Sprintf("$%d", i+1)
			}
			rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE planned(`+strings.Join(params, ", ")+`)`,
				append([]any{pgx.QueryExecModeSimpleProtocol}, st.args...)...)
			if err != nil {
				return err
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			out = append(out, mode+":\n"+strings.Join(lines, "\n"))
			return nil
		})
		if err != nil {
			t.Fatalf("planning %s: %v", st.sql, err)
		}
	}
	return out
}

// Issuing a burst pays for every index of dispatches and every check of its status history,
// inside the transactions that hold back every organisation's notifications (migration
// 00034): dispatches keeps the indexes its reads use and no other, and the status history no
// foreign key. Every read of dispatches is planned on an index, its generic plan and the one
// for its arguments alike, on a table of many assets' histories with statistics: the battery
// schedule's windows of an asset on dispatches_openadr_asset (dispatches_asset is gone), the
// OpenADR searches on their own.
func TestDispatchReadsArePlannedOnTheirIndexes(t *testing.T) {
	ctx := context.Background()
	var indexes []string
	rows, err := testDB.Pool.Query(ctx, `SELECT indexname FROM pg_indexes WHERE tablename = 'dispatches' ORDER BY indexname`)
	if err != nil {
		t.Fatal(err)
	}
	if indexes, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	want := []string{"dispatches_openadr", "dispatches_openadr_asset", "dispatches_openadr_program",
		"dispatches_organisation_flex_event_asset_id_key", "dispatches_pkey", "dispatches_site"}
	if !slices.Equal(indexes, want) {
		t.Errorf("dispatches' indexes: %v, want %v", indexes, want)
	}
	if n := count(t, `SELECT count(*) FROM pg_constraint WHERE conrelid = 'dispatch_status_changes'::regclass AND contype = 'f'`); n != 0 {
		t.Errorf("dispatch_status_changes has %d foreign keys, want none", n)
	}

	traced := &statements{}
	s := tracedStore(t, traced)
	const org, assets, events = "org-index-plans", 300, 30
	for e := range events {
		from := start.Add(time.Duration(e-events/2) * 24 * time.Hour)
		ds := make([]dispatchstore.Dispatch, 0, assets)
		for a := range assets {
			ds = append(ds, dispatchstore.Dispatch{FlexEvent: fmt.Sprintf("fe-%d", e), SiteID: fmt.Sprintf("site-%d", a),
				AssetID: fmt.Sprintf("asset-%d", a), MarketID: "limited_pause", Proposition: []string{"limited_pause", "price_curve"}[e%2],
				LevelKW: 3, From: from, To: from.Add(time.Hour), EventTimestamp: from.Add(-time.Hour)})
		}
		if _, err := s.Issue(ctx, org, "https://flexsite.test", ds, nil, start); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Cancel(ctx, org, "fe-3", start); err != nil {
		t.Fatal(err)
	}
	id := dispatch.EventID(org, "fe-20", "asset-7")
	if _, err := s.Record(ctx, org, dispatchstore.Report{AssetID: "asset-7", EventID: id, Status: dispatch.Accepted,
		At: start, By: "client"}, start); err != nil {
		t.Fatal(err)
	}
	// Without the foreign key, the writers keep the relation: every status change has its
	// dispatch.
	if n := count(t, `SELECT count(*) FROM dispatch_status_changes c WHERE c.organisation = $1
		AND NOT EXISTS (SELECT 1 FROM dispatches d WHERE d.organisation = c.organisation AND d.event_id = c.event_id)`, org); n != 0 {
		t.Errorf("%d status changes without their dispatch", n)
	}
	if n := count(t, `SELECT count(*) FROM dispatch_status_changes WHERE organisation = $1`, org); n != assets*events+assets+1 {
		t.Errorf("%d status changes, want %d", n, assets*events+assets+1)
	}
	if _, err := testDB.Pool.Exec(ctx, `ANALYZE dispatches`); err != nil {
		t.Fatal(err)
	}
	traced.take()

	// Every read of dispatches, as its callers make it.
	reads := map[string]func() error{
		"the battery schedule's windows of an asset": func() error {
			_, err := s.WindowsOfAsset(ctx, org, "asset-7", start, start.Add(48*time.Hour))
			return err
		},
		"the OpenADR search of the organisation": func() error {
			_, err := s.SearchIssued(ctx, org, dispatchstore.IssuedQuery{Limit: 50})
			return err
		},
		"the OpenADR search of a program": func() error {
			_, err := s.SearchIssued(ctx, org, dispatchstore.IssuedQuery{Proposition: "price_curve", Limit: 50, Skip: 10})
			return err
		},
		"the OpenADR search of assets": func() error {
			_, err := s.SearchIssued(ctx, org, dispatchstore.IssuedQuery{Assets: []string{"asset-7", "asset-8"}, Limit: 50})
			return err
		},
		"an OpenADR event by id": func() error {
			_, err := s.IssuedByID(ctx, org, id)
			return err
		},
		"a site's executed dispatches": func() error {
			_, err := s.ExecutedOfSite(ctx, org, "site-7", 20)
			return err
		},
		"a site's counts": func() error {
			_, err := s.CountsOfSite(ctx, org, "site-7")
			return err
		},
		"an event's counts": func() error {
			_, err := s.Counts(ctx, org, "fe-20")
			return err
		},
		"a dispatch": func() error {
			_, err := s.Of(ctx, org, id)
			return err
		},
	}
	for name, read := range reads {
		if err := read(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		// (A report's NOTIFY, sent moments after it, may come between: not a read.)
		ran := slices.DeleteFunc(traced.take(), func(st ranStatement) bool { return !strings.Contains(st.sql, "dispatches") })
		if len(ran) != 1 {
			t.Fatalf("%s ran %d statements, want 1", name, len(ran))
		}
		for _, plan := range plans(t, ran[0]) {
			if strings.Contains(plan, "Seq Scan on dispatches") || !strings.Contains(plan, "Index") {
				t.Errorf("%s is not planned on an index:\n%s", name, plan)
			}
			if name == "the battery schedule's windows of an asset" && !strings.Contains(plan, "dispatches_openadr_asset") {
				t.Errorf("%s is not planned on dispatches_openadr_asset:\n%s", name, plan)
			}
			t.Logf("%s, %s", name, plan)
		}
	}
}

// tracedStore is a Store on a pool of its own whose statements tracer sees (closed with the
// test).
func tracedStore(t *testing.T, tracer pgx.QueryTracer) *dispatchstore.Store {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDB.URL)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.Tracer = tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return &dispatchstore.Store{Pool: pool}
}
