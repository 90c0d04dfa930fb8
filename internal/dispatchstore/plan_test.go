package dispatchstore_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// planned is a Querier that, before it runs a statement on the pool, asks PostgreSQL for the
// statement's generic plan (the one a prepared statement settles on) and keeps its text.
type planned struct {
	t     *testing.T
	plans []string
}

func (p *planned) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	p.t.Helper()
	err := pgx.BeginFunc(ctx, testDB.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL plan_cache_mode = force_generic_plan`); err != nil {
			return err
		}
		if _, err := tx.Prepare(ctx, "planned", sql); err != nil {
			return err
		}
		defer func() { _, _ = tx.Exec(ctx, `DEALLOCATE planned`) }()
		params := make([]string, len(args))
		for i := range params {
			params[i] = fmt.Sprintf("$%d", i+1)
		}
		rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) EXECUTE planned(`+strings.Join(params, ", ")+`)`,
			append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
		if err != nil {
			return err
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		p.plans = append(p.plans, strings.Join(lines, "\n"))
		return nil
	})
	if err != nil {
		p.t.Fatal(err)
	}
	return testDB.Pool.QueryRow(ctx, sql, args...)
}

// A report of a dispatch's status reads the dispatch by its key, whatever the statistics say:
// with none yet (a burst of dispatches before autovacuum's next ANALYZE), a statement that
// asked for the dispatch with its asset in one condition was planned on an index of the asset,
// every dispatch of the asset visited at every report. The callback's statement and the
// OpenADR report's (RecordJoined) alike.
func TestRecordReadsTheDispatchByItsKey(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org, asset = "org-record-plan", "asset-plan"
	const dispatched = 2000
	ds := make([]dispatchstore.Dispatch, 0, dispatched)
	for i := range dispatched {
		ds = append(ds, dispatchstore.Dispatch{FlexEvent: fmt.Sprintf("fe-%d", i), SiteID: "site-plan", AssetID: asset,
			MarketID: "limited_pause", From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)})
	}
	if _, err := s.Issue(ctx, org, "https://flexsite.test", ds, nil, start); err != nil {
		t.Fatal(err)
	}
	// The table as before autovacuum's first ANALYZE of it (a new installation's first bursts):
	// no statistics, its size unknown.
	for _, sql := range []string{`DELETE FROM pg_statistic WHERE starelid = 'dispatches'::regclass`,
		`UPDATE pg_class SET reltuples = -1 WHERE oid = 'dispatches'::regclass`} {
		if _, err := testDB.Pool.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
	}
	now := start.Add(-30 * time.Minute)
	q := &planned{t: t}
	report := func(flexEvent string) dispatchstore.Report {
		return dispatchstore.Report{AssetID: asset, EventID: dispatch.EventID(org, flexEvent, asset), Status: dispatch.Accepted,
			At: now, By: "client"}
	}
	if changed, _, err := s.RecordOn(ctx, q, org, report("fe-1"), now); err != nil || !changed {
		t.Fatalf("the callback: changed %v, %v", changed, err)
	}
	if _, _, _, err := s.RecordJoined(ctx, q, org, report("fe-2"), now,
		dispatchstore.Joined{Statement: dispatchstore.NewJoinedStatement(`true`, `true`, ``, `SELECT 1 FROM takes`)}); err != nil {
		t.Fatalf("the joined report: %v", err)
	}
	for _, plan := range q.plans {
		if strings.Contains(plan, "dispatches_openadr_asset") || !strings.Contains(plan, "dispatches_pkey") {
			t.Errorf("a report's statement is not planned on the primary key:\n%s", plan)
		}
	}
}
