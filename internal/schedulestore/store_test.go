package schedulestore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/schedulestore"
)

var testDB *dbtest.Database

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB)
}

var evening = time.Date(2026, 11, 27, 18, 0, 0, 0, time.UTC)

func at(h int) time.Time { return evening.Add(time.Duration(h) * time.Hour) }

func answer(site, asset string, answered, windowEnd time.Time, blockStart int) schedulestore.EVSchedule {
	return schedulestore.EVSchedule{SiteID: site, AssetID: asset,
		Requested: []schedulestore.Block{{Start: answered, End: answered.Add(2 * time.Hour)}},
		Blocks:    []schedulestore.Block{{Start: at(blockStart), End: at(blockStart + 2)}},
		Changed:   true, WindowEnd: windowEnd, AnsweredAt: answered, AnsweredBy: "client-" + asset}
}

func TestLatestOfSite(t *testing.T) {
	ctx := context.Background()
	s := &schedulestore.Store{Pool: testDB.Pool}
	for _, a := range []struct {
		org string
		e   schedulestore.EVSchedule
	}{
		// a1: two answers; the later one stands.
		{"org-a", answer("s1", "a1", at(0), at(13), 7)},
		{"org-a", answer("s1", "a1", at(1), at(14), 8)},
		// a2: one answer whose window ends at 21:00.
		{"org-a", answer("s1", "a2", at(0), at(3), 1)},
		// a0: an unchanged answer with no blocks of its own.
		{"org-a", schedulestore.EVSchedule{SiteID: "s1", AssetID: "a0", WindowEnd: at(12), AnsweredAt: at(0), AnsweredBy: "c"}},
		// Another site's and another organisation's answers about the same site id.
		{"org-a", answer("s2", "a3", at(0), at(13), 7)},
		{"org-b", answer("s1", "a1", at(2), at(15), 9)},
	} {
		if err := s.Append(ctx, a.org, a.e); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.LatestOfSite(ctx, "org-a", "s1", at(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].AssetID != "a0" || got[1].AssetID != "a1" || got[2].AssetID != "a2" {
		t.Fatalf("at 20:00: %+v, want a0, a1 and a2 in asset order", got)
	}
	a1 := got[1]
	if a1.SiteID != "s1" || !a1.AnsweredAt.Equal(at(1)) || a1.AnsweredBy != "client-a1" || !a1.Changed || !a1.WindowEnd.Equal(at(14)) ||
		len(a1.Blocks) != 1 || !a1.Blocks[0].Start.Equal(at(8)) || !a1.Blocks[0].End.Equal(at(10)) ||
		len(a1.Requested) != 1 || !a1.Requested[0].Start.Equal(at(1)) {
		t.Errorf("a1's latest answer: %+v", a1)
	}
	if a0 := got[0]; a0.Changed || a0.Blocks == nil || len(a0.Blocks) != 0 || len(a0.Requested) != 0 {
		t.Errorf("a0's answer without blocks: %+v", a0)
	}
	// At 21:00 a2's window has ended: it is skipped.
	got, err = s.LatestOfSite(ctx, "org-a", "s1", at(3))
	if err != nil || len(got) != 2 || got[0].AssetID != "a0" || got[1].AssetID != "a1" {
		t.Errorf("at 21:00: %+v, %v, want a0 and a1", got, err)
	}
	if got, err := s.LatestOfSite(ctx, "org-a", "s9", at(0)); err != nil || len(got) != 0 {
		t.Errorf("a site without answers: %+v, %v", got, err)
	}
}

// A newer answer replaces an older one even when its window ends sooner: once the newer
// window has ended, the asset has no standing answer — the older, superseded one is not
// shown again (the car was given the newer schedule).
func TestLatestOfSiteNeverFallsBackToASupersededAnswer(t *testing.T) {
	ctx := context.Background()
	s := &schedulestore.Store{Pool: testDB.Pool}
	// 18:00: plugged in, ready by 07:00 tomorrow; 19:00: re-planned without an intent, window to 20:00.
	if err := s.Append(ctx, "org-s", answer("s1", "a1", at(0), at(13), 7)); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "org-s", answer("s1", "a1", at(1), at(2), 1)); err != nil {
		t.Fatal(err)
	}
	got, err := s.LatestOfSite(ctx, "org-s", "s1", at(1))
	if err != nil || len(got) != 1 || !got[0].AnsweredAt.Equal(at(1)) {
		t.Fatalf("at 19:00: %+v, %v, want the 19:00 answer", got, err)
	}
	got, err = s.LatestOfSite(ctx, "org-s", "s1", at(3))
	if err != nil || len(got) != 0 {
		t.Errorf("at 21:00: %+v, %v, want nothing (the 19:00 answer ended; the 18:00 one was replaced)", got, err)
	}
}

// A site's latest answers are read through ev_schedules_latest, never by sorting the site's
// history: with 20,000 older answers of the site stored, the plan of the read has no Sort and
// no sequential scan of ev_schedules (a plan check, not a timing), and the answer is each
// asset's latest.
func TestLatestOfSiteReadsNoHistory(t *testing.T) {
	ctx := context.Background()
	s := &schedulestore.Store{Pool: testDB.Pool}
	const org, site, history = "org-plan", "s-long", 20_000
	// The history: older answers of the site's five assets, as months of plug-ins leave them.
	if _, err := testDB.Pool.Exec(ctx, `INSERT INTO ev_schedules (organisation, site_id, asset_id, requested, blocks,
			changed, window_end, answered_at, answered_by)
		SELECT $1, $2, 'a' || (i % 5), '[]', '[]', false, $3::timestamptz, $4::timestamptz, 'old'
		FROM generate_series(1, $5) AS i`, org, site, at(30), at(0), history); err != nil {
		t.Fatal(err)
	}
	for i := range 5 {
		e := answer(site, fmt.Sprintf("a%d", i), at(1), at(13), 7)
		e.AnsweredBy = "latest"
		if err := s.Append(ctx, org, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := testDB.Pool.Exec(ctx, `ANALYZE ev_schedules, ev_schedules_latest`); err != nil {
		t.Fatal(err)
	}
	got, err := s.LatestOfSite(ctx, org, site, at(2))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 {
		t.Fatalf("%d answers, want the 5 assets' latest", len(got))
	}
	for i, e := range got {
		if e.AssetID != fmt.Sprintf("a%d", i) || e.AnsweredBy != "latest" || !e.WindowEnd.Equal(at(13)) {
			t.Errorf("answer %d: %+v, want a%d's latest", i, e, i)
		}
	}

	var plan []struct {
		Plan planNode `json:"Plan"`
	}
	var raw []byte
	if err := testDB.Pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+schedulestore.LatestOfSiteSQL, org, site, at(2)).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &plan); err != nil || len(plan) != 1 {
		t.Fatalf("the plan: %v: %s", err, raw)
	}
	plan[0].Plan.walk(func(n planNode) {
		if n.NodeType == "Sort" || n.NodeType == "Incremental Sort" {
			t.Errorf("the read sorts: %s", raw)
		}
		if n.NodeType == "Seq Scan" && n.RelationName == "ev_schedules" {
			t.Errorf("the read scans the whole history: %s", raw)
		}
	})
}

// planNode is what the tests read of a node of EXPLAIN (FORMAT JSON).
type planNode struct {
	NodeType     string     `json:"Node Type"`
	RelationName string     `json:"Relation Name"`
	Plans        []planNode `json:"Plans"`
}

func (n planNode) walk(visit func(planNode)) {
	visit(n)
	for _, c := range n.Plans {
		c.walk(visit)
	}
}

// Answers are deleted Retention past the end of their window, never sooner; an asset's latest
// answer deleted takes no older answer's place (a superseded answer stays superseded).
func TestDeleteExpired(t *testing.T) {
	ctx := context.Background()
	s := &schedulestore.Store{Pool: testDB.Pool}
	now := at(0)
	expired, kept := now.Add(-schedulestore.Retention-time.Hour), now.Add(-schedulestore.Retention+time.Hour)
	for _, e := range []schedulestore.EVSchedule{
		// a1: an old answer past its retention, then the standing one.
		answer("s1", "a1", expired.Add(-time.Hour), expired, 7),
		answer("s1", "a1", at(-1), at(13), 8),
		// a2: an answer with a long window, replaced by one whose window ended long ago.
		answer("s1", "a2", expired.Add(-2*time.Hour), at(13), 1),
		answer("s1", "a2", expired.Add(-time.Hour), expired, 2),
		// a3: an answer whose window ended, within its retention.
		answer("s1", "a3", kept.Add(-time.Hour), kept, 3),
	} {
		if err := s.Append(ctx, "org-r", e); err != nil {
			t.Fatal(err)
		}
	}
	n, err := s.DeleteExpired(ctx, now)
	if err != nil || n != 2 {
		t.Fatalf("deleted %d, %v; want the two answers past their retention", n, err)
	}
	if n := count(t, `SELECT count(*) FROM ev_schedules WHERE organisation = 'org-r'`); n != 3 {
		t.Errorf("%d answers kept, want 3", n)
	}
	got, err := s.LatestOfSite(ctx, "org-r", "s1", now)
	if err != nil || len(got) != 1 || got[0].AssetID != "a1" || !got[0].WindowEnd.Equal(at(13)) {
		t.Errorf("after the sweep: %+v, %v; want a1's standing answer only (a2's older answer stays replaced)", got, err)
	}
	if n, err := s.DeleteExpired(ctx, now); err != nil || n != 0 {
		t.Errorf("a second sweep deleted %d, %v", n, err)
	}
}

func count(t *testing.T, query string) int {
	t.Helper()
	var n int
	if err := testDB.Pool.QueryRow(context.Background(), query).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// (Last in the file: it stops the server.)
func TestUnavailable(t *testing.T) {
	if !testDB.CanStop() {
		t.Skip("the test database's server is not this process's")
	}
	ctx := context.Background()
	s := &schedulestore.Store{Pool: testDB.Pool}
	if err := testDB.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "org-u", answer("s1", "a1", at(0), at(13), 7)); !db.Unavailable(err) {
		t.Errorf("Append with the database stopped: %v", err)
	}
	if _, err := s.LatestOfSite(ctx, "org-u", "s1", at(0)); !db.Unavailable(err) {
		t.Errorf("LatestOfSite with the database stopped: %v", err)
	}
	if err := testDB.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(ctx, "org-u", answer("s1", "a1", at(0), at(13), 7)); err != nil {
		t.Fatalf("after the database came back: %v", err)
	}
}
