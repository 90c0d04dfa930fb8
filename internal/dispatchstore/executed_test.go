package dispatchstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// A site's executed dispatches, and only those: the rewards page says what a device did only
// when its controller reported it executed.
func TestExecutedOfSite(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org = "org-executed"
	later := start.Add(24 * time.Hour)
	// The household's site has a charger and a battery, asked by two events; a neighbour's
	// charger is asked by the first.
	ds := []dispatchstore.Dispatch{
		{FlexEvent: "ev-1", SiteID: "home", AssetID: "charger", MarketID: "limited_pause", LevelKW: 0,
			From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)},
		{FlexEvent: "ev-1", SiteID: "home", AssetID: "battery", MarketID: "limited_pause", LevelKW: 5,
			From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)},
		{FlexEvent: "ev-1", SiteID: "neighbour", AssetID: "their-charger", MarketID: "limited_pause", LevelKW: 0,
			From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)},
		{FlexEvent: "ev-2", SiteID: "home", AssetID: "charger", MarketID: "limited_pause", LevelKW: -7.4,
			From: later, To: later.Add(30 * time.Minute), EventTimestamp: later.Add(-time.Hour)},
		{FlexEvent: "ev-2", SiteID: "home", AssetID: "battery", MarketID: "limited_pause", LevelKW: -5,
			From: later, To: later.Add(30 * time.Minute), EventTimestamp: later.Add(-time.Hour)},
	}
	if _, err := s.Issue(ctx, org, "https://flexsite.example", ds, nil, start.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ExecutedOfSite(ctx, org, "home", 10); err != nil || len(got) != 0 {
		t.Fatalf("before any report: %v, %v; want none (requested is not executed)", got, err)
	}
	// Each report is made at its window's start (EXECUTED is refused before it).
	report := func(event, asset string, statuses ...dispatch.Status) {
		t.Helper()
		at := start
		if event == "ev-2" {
			at = later
		}
		for _, st := range statuses {
			if _, err := s.Record(ctx, org, dispatchstore.Report{AssetID: asset, EventID: dispatch.EventID(org, event, asset),
				Status: st, At: at, By: "client"}, at); err != nil {
				t.Fatalf("%s %s %s: %v", event, asset, st, err)
			}
		}
	}
	report("ev-1", "charger", dispatch.Accepted, dispatch.Executed)
	report("ev-1", "battery", dispatch.Accepted)                  // accepted only: not shown
	report("ev-1", "their-charger", dispatch.Executed)            // another site's
	report("ev-2", "charger", dispatch.Executed)                  // straight to executed
	report("ev-2", "battery", dispatch.Accepted, dispatch.Failed) // failed: not shown
	// Another organisation's dispatches of the same site and asset ids are not this one's.
	if _, err := s.Issue(ctx, "org-other", "https://flexsite.example", ds[:1], nil, start.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Record(ctx, "org-other", dispatchstore.Report{AssetID: "charger",
		EventID: dispatch.EventID("org-other", "ev-1", "charger"), Status: dispatch.Executed, At: start, By: "other"}, start); err != nil {
		t.Fatal(err)
	}

	got, err := s.ExecutedOfSite(ctx, org, "home", 10)
	if err != nil {
		t.Fatal(err)
	}
	want := []dispatchstore.Executed{
		{FlexEvent: "ev-2", AssetID: "charger", LevelKW: -7.4, From: later, To: later.Add(30 * time.Minute)},
		{FlexEvent: "ev-1", AssetID: "charger", LevelKW: 0, From: start, To: start.Add(time.Hour)},
	}
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		g, w := got[i], want[i]
		same = g.FlexEvent == w.FlexEvent && g.AssetID == w.AssetID && g.LevelKW == w.LevelKW &&
			g.From.Equal(w.From) && g.To.Equal(w.To)
	}
	if !same {
		t.Errorf("ExecutedOfSite = %+v, want %+v", got, want)
	}
	if got, err := s.ExecutedOfSite(ctx, org, "home", 1); err != nil || len(got) != 1 || got[0].FlexEvent != "ev-2" {
		t.Errorf("limit 1: %v, %v; want the newest only", got, err)
	}
	if got, err := s.ExecutedOfSite(ctx, org, "nobody", 10); err != nil || len(got) != 0 {
		t.Errorf("a site without dispatches: %v, %v", got, err)
	}
}
