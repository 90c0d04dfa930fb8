package dispatchstore_test

import (
	"context"
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
