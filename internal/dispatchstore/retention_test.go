package dispatchstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// A dispatch's status changes are deleted StatusChangesRetentionMonths after they were
// recorded, and only once the site's settlement of its flex event is recorded (or the dispatch
// was cancelled: its event was deleted before its end, never to be settled); the dispatch and
// its current status stay.
func TestDeleteExpiredStatusChanges(t *testing.T) {
	ctx := context.Background()
	s := &dispatchstore.Store{Pool: testDB.Pool}
	const org = "org-retention"
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	long := now.AddDate(0, -dispatchstore.StatusChangesRetentionMonths, -1)
	recent := now.AddDate(0, -1, 0)
	issue := func(flexEvent, site string, from time.Time, executed bool) {
		t.Helper()
		d := dispatchstore.Dispatch{FlexEvent: flexEvent, SiteID: site, AssetID: "asset-" + site, MarketID: "limited_pause",
			From: from, To: from.Add(time.Hour), EventTimestamp: from.Add(-time.Hour)}
		if _, err := s.Issue(ctx, org, "https://flexsite.test", []dispatchstore.Dispatch{d}, nil, from.Add(-time.Hour)); err != nil {
			t.Fatal(err)
		}
		if !executed {
			return
		}
		if _, err := s.Record(ctx, org, dispatchstore.Report{AssetID: d.AssetID, EventID: dispatch.EventID(org, flexEvent, d.AssetID),
			Status: dispatch.Executed, At: from.Add(time.Hour), By: "controller"}, from.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	settled := func(flexEvent, site string) {
		t.Helper()
		if _, err := testDB.Pool.Exec(ctx, `INSERT INTO flex_event_settlements (organisation, event_id, site_id, status, reason)
			VALUES ($1, $2, $3, 'skipped', 'insufficient_readings')`, org, flexEvent, site); err != nil {
			t.Fatal(err)
		}
	}
	issue("ev-old", "settled", long, true) // old and settled: its 2 changes go
	settled("ev-old", "settled")
	issue("ev-old", "pending", long, true) // old, its site not settled yet: kept
	// Requested, then cancelled before its end (its event deleted): never to be settled.
	issue("ev-gone", "cancelled", long.Add(-2*time.Hour), false)
	if c, err := s.Cancel(ctx, org, "ev-gone", long.Add(-3*time.Hour)); err != nil || c != 1 {
		t.Fatalf("cancelled %d, %v", c, err)
	}
	issue("ev-recent", "settled", recent, true) // settled, within its retention: kept
	settled("ev-recent", "settled")

	n, err := s.DeleteExpiredStatusChanges(ctx, now)
	if err != nil {
		t.Fatal(err)
	}
	if n != 4 {
		t.Fatalf("deleted %d status changes, want the 2 of the settled old dispatch and the 2 of the cancelled one", n)
	}
	left := count(t, `SELECT count(*) FROM dispatch_status_changes c JOIN dispatches d USING (organisation, event_id)
		WHERE c.organisation = $1 AND (d.flex_event, d.site_id) IN (('ev-old', 'settled'), ('ev-gone', 'cancelled'))`, org)
	if left != 0 {
		t.Errorf("%d status changes of the settled and the cancelled old dispatches left", left)
	}
	if kept := count(t, `SELECT count(*) FROM dispatch_status_changes c JOIN dispatches d USING (organisation, event_id)
		WHERE c.organisation = $1 AND (d.flex_event, d.site_id) IN (('ev-old', 'pending'), ('ev-recent', 'settled'))`, org); kept != 4 {
		t.Errorf("%d status changes kept of the unsettled and the recent dispatches, want 4", kept)
	}
	if ds := count(t, `SELECT count(*) FROM dispatches WHERE organisation = $1`, org); ds != 4 {
		t.Errorf("%d dispatches, want all 4 kept with their status", ds)
	}
	if n, err := s.DeleteExpiredStatusChanges(ctx, now); err != nil || n != 0 {
		t.Errorf("a second sweep deleted %d, %v", n, err)
	}
}
