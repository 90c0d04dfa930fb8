package dispatchstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

var start = time.Date(2026, 7, 1, 17, 0, 0, 0, time.UTC)

func dispatches(flexEvent string, n int) []dispatchstore.Dispatch {
	out := make([]dispatchstore.Dispatch, n)
	for i := range out {
		out[i] = dispatchstore.Dispatch{FlexEvent: flexEvent, SiteID: fmt.Sprintf("site-%d", i), AssetID: fmt.Sprintf("asset-%d", i),
			MarketID: "limited_pause", LevelKW: 0, From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)}
	}
	return out
}

func count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := testDB.Pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Three replicas (each its own pool) racing to issue one event over 1,000 assets issue
// exactly 1,000 dispatches, each with one dispatch.requested event in the outbox.
func TestThreeReplicasIssueOnce(t *testing.T) {
	ctx := context.Background()
	ds := dispatches("race", 1000)
	var wg sync.WaitGroup
	issued := make([]int, 3)
	for r := range 3 {
		pool, err := pgxpool.New(ctx, testDB.URL)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := &dispatchstore.Store{Pool: pool}
			// Each replica goes through the assets in its own order.
			mine := append(append([]dispatchstore.Dispatch{}, ds[r*300:]...), ds[:r*300]...)
			n, err := s.Issue(ctx, "org-race", "https://flexsite.example", mine, nil, start.Add(-time.Hour))
			if err != nil {
				t.Error(err)
			}
			issued[r] = n
		}()
	}
	wg.Wait()
	if got := issued[0] + issued[1] + issued[2]; got != 1000 {
		t.Errorf("the replicas say they issued %v (sum %d), want 1,000 in all", issued, got)
	}
	if n := count(t, `SELECT count(*) FROM dispatches WHERE organisation = 'org-race'`); n != 1000 {
		t.Errorf("%d dispatches, want 1,000", n)
	}
	if n := count(t, `SELECT count(*) FROM outbox WHERE organisation = 'org-race' AND event_type = 'dispatch.requested'`); n != 1000 {
		t.Errorf("%d dispatch.requested events, want 1,000", n)
	}
	if n := count(t, `SELECT count(*) FROM dispatch_status_changes WHERE organisation = 'org-race'`); n != 1000 {
		t.Errorf("%d status changes, want 1,000 (one 'requested' each)", n)
	}
}

func TestIssueSkipRecordCancel(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org = "org-a"
	ds := dispatches("ev", 3)
	skips := []dispatchstore.Skip{{FlexEvent: "ev", SiteID: "site-9", AssetID: "asset-9", Reason: dispatch.NotPluggedIn},
		{FlexEvent: "ev", SiteID: "site-2", AssetID: "asset-2", Reason: dispatch.ChargeNow}}
	// asset-2 is skipped first, then dispatched: it counts once, as dispatched.
	if n, err := s.Issue(ctx, org, "https://flexsite.example", ds[:2], skips, start.Add(-time.Hour)); err != nil || n != 2 {
		t.Fatalf("Issue = %d, %v", n, err)
	}
	if n, err := s.Issue(ctx, org, "https://flexsite.example", ds, skips, start.Add(-time.Hour)); err != nil || n != 1 {
		t.Fatalf("Issue again = %d, %v; want only the new one", n, err)
	}
	var payload string
	id0 := dispatch.EventID(org, "ev", "asset-0")
	if err := testDB.Pool.QueryRow(ctx, `SELECT payload::text FROM outbox WHERE organisation = $1 AND event_id = $2`,
		org, dispatchstore.RequestedEventID(id0)).Scan(&payload); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf(`"update_status_callback": "https://flexsite.example/entities/asset/asset-0/callback/%s"`, id0)
	if !contains(payload, want) || !contains(payload, `"from_time": "2026-07-01T17:00:00Z"`) {
		t.Errorf("dispatch.requested's data: %s", payload)
	}

	rep := func(asset string, st dispatch.Status) (bool, error) {
		return s.Record(ctx, org, dispatchstore.Report{AssetID: asset, EventID: dispatch.EventID(org, "ev", asset),
			Status: st, At: start, By: "client"}, start)
	}
	for _, step := range []struct {
		asset   string
		st      dispatch.Status
		changed bool
		err     error
	}{
		{"asset-0", dispatch.Accepted, true, nil},
		{"asset-0", dispatch.Accepted, false, nil},
		{"asset-0", dispatch.Received, false, dispatch.ErrStepBack},
		{"asset-0", dispatch.Executed, true, nil},
		{"asset-0", dispatch.Failed, false, dispatch.ErrFinal},
		{"asset-1", dispatch.Received, true, nil},
		{"asset-9", dispatch.Received, false, dispatchstore.ErrNotFound},
	} {
		changed, err := rep(step.asset, step.st)
		if changed != step.changed || !errors.Is(err, step.err) || (step.err == nil) != (err == nil) {
			t.Errorf("%s %s: %v, %v; want %v, %v", step.asset, step.st, changed, err, step.changed, step.err)
		}
	}
	// Another organisation's report of the same ids finds nothing.
	if _, err := s.Record(ctx, "org-b", dispatchstore.Report{AssetID: "asset-1", EventID: dispatch.EventID(org, "ev", "asset-1"),
		Status: dispatch.Accepted, At: start, By: "other"}, start); !errors.Is(err, dispatchstore.ErrNotFound) {
		t.Errorf("another organisation's report: %v", err)
	}
	if n, err := s.Cancel(ctx, org, "ev", start); err != nil || n != 2 {
		t.Errorf("Cancel = %d, %v; want the 2 open ones (asset-0 is executed)", n, err)
	}
	if n, err := s.Cancel(ctx, org, "ev", start); err != nil || n != 0 {
		t.Errorf("Cancel again = %d, %v", n, err)
	}
	if _, err := rep("asset-1", dispatch.Accepted); !errors.Is(err, dispatch.ErrFinal) {
		t.Errorf("a report after the cancellation: %v, want ErrFinal", err)
	}
	c, err := s.Counts(ctx, org, "ev")
	if err != nil {
		t.Fatal(err)
	}
	if c.Issued() != 3 || c.ByStatus[dispatch.Executed] != 1 || c.ByStatus[dispatch.Cancelled] != 2 ||
		c.Skipped[dispatch.NotPluggedIn] != 1 || c.Skipped[dispatch.ChargeNow] != 0 {
		t.Errorf("counts: %+v", c)
	}
	if got := c.Summary(); got != "3 asked: 1 executed, 2 cancelled; 1 skipped" {
		t.Errorf("summary: %q", got)
	}
	if n := count(t, `SELECT count(*) FROM outbox WHERE organisation = $1 AND event_type = 'dispatch.cancelled'`, org); n != 2 {
		t.Errorf("%d dispatch.cancelled events, want 2", n)
	}
	if n := count(t, `SELECT count(*) FROM dispatch_status_changes WHERE organisation = $1`, org); n != 3+2+1+2 {
		t.Errorf("%d status changes kept, want 8 (3 requested, 2 by asset-0, 1 by asset-1, 2 cancelled)", n)
	}
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
