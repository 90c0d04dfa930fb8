package dispatchstore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// CountsOf answers a page of events in one query, every event named (empty when nothing was
// issued for it), and CountsOfSite one site's share of each event; neither counts another
// organisation's.
func TestCountsOfAndOfSite(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org = "org-counts"
	issue := func(organisation string, ds []dispatchstore.Dispatch, skips []dispatchstore.Skip) {
		t.Helper()
		if _, err := s.Issue(ctx, organisation, "https://flexsite.example", ds, skips, start.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	// ev-1: sites 0, 1, 2 asked, site-1's second asset skipped; ev-2: sites 0, 1 asked.
	issue(org, dispatches("ev-1", 3), []dispatchstore.Skip{{FlexEvent: "ev-1", SiteID: "site-1", AssetID: "asset-1b",
		Reason: dispatch.ChargeNow}})
	issue(org, dispatches("ev-2", 2), nil)
	issue("org-other", dispatches("ev-1", 5), nil)
	if _, err := s.Record(ctx, org, dispatchstore.Report{AssetID: "asset-1", EventID: dispatch.EventID(org, "ev-1", "asset-1"),
		Status: dispatch.Executed, At: start, By: "client"}, start); err != nil {
		t.Fatal(err)
	}

	all, err := s.CountsOf(ctx, org, []string{"ev-1", "ev-2", "ev-none"})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		event                 string
		issued, executed, req int32
		skipped               int32
	}{
		{"ev-1", 3, 1, 2, 1}, {"ev-2", 2, 0, 2, 0}, {"ev-none", 0, 0, 0, 0},
	} {
		got, ok := all[c.event]
		if !ok || got.Issued() != c.issued || got.ByStatus[dispatch.Executed] != c.executed ||
			got.ByStatus[dispatch.Requested] != c.req || got.Skipped[dispatch.ChargeNow] != c.skipped {
			t.Errorf("CountsOf[%s] = %+v (present %v)", c.event, got, ok)
		}
	}
	one, err := s.Counts(ctx, org, "ev-1")
	if err != nil || one.Summary() != "3 asked: 1 executed; 1 skipped" {
		t.Errorf("Counts(ev-1) = %q, %v", one.Summary(), err)
	}

	site1, err := s.CountsOfSite(ctx, org, "site-1")
	if err != nil {
		t.Fatal(err)
	}
	if len(site1) != 2 || site1["ev-1"].Issued() != 1 || site1["ev-1"].ByStatus[dispatch.Executed] != 1 ||
		site1["ev-1"].Skipped[dispatch.ChargeNow] != 1 || site1["ev-2"].ByStatus[dispatch.Requested] != 1 {
		t.Errorf("CountsOfSite(site-1) = %+v", site1)
	}
	if site9, err := s.CountsOfSite(ctx, org, "site-9"); err != nil || len(site9) != 0 {
		t.Errorf("CountsOfSite(site-9) = %+v, %v; want none", site9, err)
	}
}

// Reports racing each other, and a cancellation, are decided one after the other: of eight
// identical reports one changes the dispatch and one history row is written; the NOTIFY of
// the change reaches a listener; a report that loses to Cancel is refused (ErrFinal).
func TestRecordRaces(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org = "org-races"
	if _, err := s.Issue(ctx, org, "https://flexsite.example", dispatches("race", 2), nil, start.Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	listener, err := testDB.Pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Release()
	if _, err := listener.Exec(ctx, "LISTEN "+dispatchstore.Channel); err != nil {
		t.Fatal(err)
	}
	report := func(asset string, st dispatch.Status) (bool, error) {
		return s.Record(ctx, org, dispatchstore.Report{AssetID: asset, EventID: dispatch.EventID(org, "race", asset),
			Status: st, At: start, By: "client"}, start)
	}
	results := make(chan bool, 8)
	errs := make(chan error, 8)
	for range 8 {
		go func() {
			changed, err := report("asset-0", dispatch.Executed)
			results <- changed
			errs <- err
		}()
	}
	changes := 0
	for range 8 {
		if <-results {
			changes++
		}
		if err := <-errs; err != nil {
			t.Errorf("a racing report: %v", err)
		}
	}
	if changes != 1 {
		t.Errorf("%d of 8 identical reports changed the dispatch, want 1", changes)
	}
	if n := count(t, `SELECT count(*) FROM dispatch_status_changes WHERE organisation = $1 AND status = 'executed'`, org); n != 1 {
		t.Errorf("%d executed history rows, want 1", n)
	}
	waitCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// Other tests' events may be notified too: wait for this one's.
	for {
		n, err := listener.Conn().WaitForNotification(waitCtx)
		if err != nil {
			t.Fatalf("no notification of %s/race: %v", org, err)
		}
		if n.Payload == org+"/race" {
			break
		}
	}

	if _, err := s.Cancel(ctx, org, "race", start); err != nil {
		t.Fatal(err)
	}
	if _, err := report("asset-1", dispatch.Accepted); !errors.Is(err, dispatch.ErrFinal) {
		t.Errorf("a report after the cancellation: %v, want ErrFinal", err)
	}
}
