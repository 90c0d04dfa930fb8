package meterstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meterstore"
)

// windowRows is how many count rows the organisation has, and their total.
func windowRows(t *testing.T, org string) (rows, total int64) {
	t.Helper()
	if err := testDB.Pool.QueryRow(context.Background(), `SELECT count(*), coalesce(sum(n), 0)::bigint
		FROM meter_lookup_counts WHERE organisation = $1`, org).Scan(&rows, &total); err != nil {
		t.Fatal(err)
	}
	return rows, total
}

// A lookup counts in every window of its budgets or in none: one refused by its household's
// hour spends nothing of its organisation's, and refused lookups spend nothing at all.
func TestLookupCountsCountInEveryWindowOrNone(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.LookupCounts{Pool: testDB.Pool}
	now := time.Date(2026, 11, 29, 13, 20, 0, 0, time.UTC)
	b := meters.Budgets{OrganisationPerHour: 5, OrganisationPerDay: 50, HouseholdPerHour: 2}
	count := func(household string) (meters.Verdict, []int64) {
		t.Helper()
		counters := b.Counters(household, now)
		counts, err := s.Count(ctx, "org-count", counters, now)
		if err != nil {
			t.Fatal(err)
		}
		return meters.Judge(now, counters, counts), counts
	}
	for i := range 2 {
		if v, counts := count("site-a"); !v.Allowed {
			t.Fatalf("household lookup %d refused: %v", i+1, counts)
		}
	}
	for range 10 {
		v, counts := count("site-a")
		if v.Allowed || v.Refused.Name != meters.BudgetHouseholdHour {
			t.Fatalf("the household's third lookup: %+v (%v), want refused by its hour", v, counts)
		}
		if counts[0] != 3 || counts[1] != 3 || counts[2] != 3 {
			t.Fatalf("a refused lookup reports the counts it would have made, %v, want [3 3 3]", counts)
		}
	}
	if _, total := windowRows(t, "org-count"); total != 2+2+2 {
		t.Errorf("counted %d in all, want 6: the refused lookups spent nothing", total)
	}
	// The organisation's API clients have 3 left of the hour.
	for i := range 3 {
		if v, counts := count(""); !v.Allowed {
			t.Fatalf("API client lookup %d refused: %v", i+1, counts)
		}
	}
	v, counts := count("")
	if v.Allowed || v.Refused.Name != meters.BudgetOrganisationHour || counts[1] != 6 {
		t.Fatalf("the organisation's sixth lookup of the hour: %+v (%v)", v, counts)
	}
	if v, _ := count("site-b"); v.Allowed {
		t.Fatal("another household's lookup is refused too, by the organisation's hour")
	}
	// Another organisation's budget is its own.
	counters := b.Counters("", now)
	if counts, err := s.Count(ctx, "org-other", counters, now); err != nil || !meters.Judge(now, counters, counts).Allowed {
		t.Fatalf("another organisation: %v, %v", counts, err)
	}
}

// Two replicas (two pools) counting at once answer at most the limit between them, exactly.
func TestLookupCountsHoldAcrossReplicas(t *testing.T) {
	ctx := context.Background()
	other, err := db.Open(ctx, testDB.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	replicas := []*meterstore.LookupCounts{{Pool: testDB.Pool}, {Pool: other}}
	now := time.Date(2026, 11, 29, 13, 20, 0, 0, time.UTC)
	b := meters.Budgets{OrganisationPerHour: 30, OrganisationPerDay: 1000}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for range 5 {
				counters := b.Counters("", now)
				counts, err := replicas[g%2].Count(ctx, "org-replicas", counters, now)
				if err != nil {
					t.Error(err)
					return
				}
				if meters.Judge(now, counters, counts).Allowed {
					allowed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if allowed.Load() != 30 {
		t.Errorf("%d of 80 lookups allowed from two replicas, want 30", allowed.Load())
	}
}

// The windows that ended are deleted when one of the organisation's begins; a household's
// when one of its own begins.
func TestLookupCountsDeleteEndedWindows(t *testing.T) {
	ctx := context.Background()
	s := &meterstore.LookupCounts{Pool: testDB.Pool}
	b := meters.Budgets{OrganisationPerHour: 5, OrganisationPerDay: 50, HouseholdPerHour: 2}
	start := time.Date(2026, 11, 29, 10, 20, 0, 0, time.UTC)
	for h := range 3 {
		now := start.Add(time.Duration(h) * time.Hour)
		if _, err := s.Count(ctx, "org-sweep", b.Counters("site-"+string(rune('a'+h)), now), now); err != nil {
			t.Fatal(err)
		}
		// The day's window, this hour's, and the household's of this hour: the earlier
		// hours' are gone (the organisation's hour began with this lookup).
		if rows, _ := windowRows(t, "org-sweep"); rows != 3 {
			t.Errorf("hour %d: %d rows, want 3", h, rows)
		}
	}
	// The next day: the day's window goes too.
	now := start.Add(24 * time.Hour)
	if _, err := s.Count(ctx, "org-sweep", b.Counters("", now), now); err != nil {
		t.Fatal(err)
	}
	if rows, total := windowRows(t, "org-sweep"); rows != 2 || total != 2 {
		t.Errorf("the next day: %d rows holding %d, want 2 holding 2", rows, total)
	}
}

// The database taken away: counting says Unavailable (the door answers 503), and counts again
// once it is back.
func TestLookupCountsWhileTheDatabaseIsDown(t *testing.T) {
	if !testDB.CanStop() {
		t.Skip("the test database's server is not this process's")
	}
	ctx := context.Background()
	s := &meterstore.LookupCounts{Pool: testDB.Pool}
	now := time.Now()
	counters := meters.DefaultBudgets.Counters("site-1", now)
	if err := testDB.Stop(); err != nil {
		t.Fatal(err)
	}
	_, err := s.Count(ctx, "org-down", counters, now)
	if !db.Unavailable(err) {
		t.Errorf("Count: %v, want db.ErrUnavailable", err)
	}
	if err := s.DeleteEnded(ctx, "org-down", "", now); !db.Unavailable(err) {
		t.Errorf("DeleteEnded: %v, want db.ErrUnavailable", err)
	}
	if err := testDB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if counts, err := s.Count(ctx, "org-down", counters, now); err != nil || len(counts) != 3 || counts[0] != 1 {
		t.Errorf("after the database came back: %v, %v", counts, err)
	}
}
