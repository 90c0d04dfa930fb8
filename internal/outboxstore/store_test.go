package outboxstore_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

var (
	testDB *dbtest.Database
	store  *outboxstore.Store
)

func TestMain(m *testing.M) {
	dbtest.Main(m, &testDB, func(d *dbtest.Database) { store = &outboxstore.Store{Pool: d.Pool} })
}

func org() string { return "org-" + uuid.NewString()[:8] }

func change(site string, status events.EnrolmentStatus) events.Change {
	return events.Change{Type: flexv1.EventEnrolmentChanged, SiteID: site,
		Data: events.EnrolmentData{SiteID: site, Status: status}}
}

func stamp(cs ...events.Change) []events.Event {
	out := make([]events.Event, len(cs))
	for i, c := range cs {
		out[i] = events.Stamp(c, time.Now())
	}
	return out
}

func count(t *testing.T, organisation string) int {
	t.Helper()
	var n int
	if err := testDB.Pool.QueryRow(context.Background(), `SELECT count(*) FROM outbox WHERE organisation = $1`,
		organisation).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// fanOut fans every pending event out, organisation o's to the subscriptions uids (others' to
// nobody), and answers how many events it fanned out.
func fanOut(t *testing.T, o string, uids ...string) int {
	t.Helper()
	fanned := 0
	for {
		n, err := store.FanOut(context.Background(), 100, func(u outboxstore.Unfanned) ([]string, bool) {
			if u.Organisation != o {
				return nil, true
			}
			return uids, true
		})
		if err != nil {
			t.Fatal(err)
		}
		fanned += n
		if n < 100 {
			return fanned
		}
	}
}

// sites are the sites of deliveries, in order.
func sites(ds []outboxstore.Delivery) string {
	s := ""
	for _, d := range ds {
		s += d.Event.SiteID
	}
	return s
}

// TestReportWritesAChangeOnce: a reconcile redone (after a conflict, a crash) computes the same
// changes and writes nothing; a new change is written; the same change as the last but one is
// news again.
func TestReportWritesAChangeOnce(t *testing.T) {
	ctx := context.Background()
	o := org()
	active, withdrawn := []events.Change{change("s", events.EnrolmentActive)}, []events.Change{change("s", events.EnrolmentWithdrawn)}
	steps := []struct {
		name    string
		changes []events.Change
		wrote   bool
		total   int
	}{
		{"first", active, true, 1},
		{"redone", active, false, 1},
		{"another change", withdrawn, true, 2},
		{"redone again", withdrawn, false, 2},
		{"back", active, true, 3},
	}
	for _, s := range steps {
		wrote, err := store.Report(ctx, o, "uid-1/enrolment", events.Digest(s.changes), stamp(s.changes...))
		if err != nil {
			t.Fatal(err)
		}
		if wrote != s.wrote || count(t, o) != s.total {
			t.Errorf("%s: wrote %v (%d events), want %v (%d)", s.name, wrote, count(t, o), s.wrote, s.total)
		}
	}
	// Another object's subject is its own.
	if wrote, err := store.Report(ctx, o, "uid-2/enrolment", events.Digest(active), stamp(active...)); err != nil || !wrote {
		t.Errorf("another subject: %v, %v", wrote, err)
	}
}

// TestAddWritesADeletionOnce: a finalizer that runs again adds the same event (its id derives
// from the object's uid) and the outbox holds it once; another organisation's same id is its own.
func TestAddWritesADeletionOnce(t *testing.T) {
	ctx := context.Background()
	o, other := org(), org()
	ev := events.StampAs(change("s", events.EnrolmentRemoved), events.RemovalID("uid-1"), time.Now())
	for range 2 {
		if err := store.Add(ctx, o, []events.Event{ev}); err != nil {
			t.Fatal(err)
		}
	}
	if err := store.Add(ctx, other, []events.Event{ev}); err != nil {
		t.Fatal(err)
	}
	if count(t, o) != 1 || count(t, other) != 1 {
		t.Errorf("%d and %d events, want 1 each", count(t, o), count(t, other))
	}
}

// TestClaimsKeepEachSiteInOrder: a subscription's deliveries are claimed one site head at a
// time (the next event of a site waits for the previous one, delivered or given up, even with
// free workers), a failed one waits for its retry, and a claim expires with its lease.
func TestClaimsKeepEachSiteInOrder(t *testing.T) {
	ctx := context.Background()
	o, sub := org(), uuid.NewString()
	if err := store.Add(ctx, o, stamp(change("a", events.EnrolmentActive), change("b", events.EnrolmentActive),
		change("a", events.EnrolmentWithdrawn))); err != nil {
		t.Fatal(err)
	}
	if fanned := fanOut(t, o, sub); fanned < 3 {
		t.Fatalf("fanned out %d events", fanned)
	}
	first, err := store.Claim(ctx, sub, 10, time.Minute)
	if err != nil || sites(first) != "ab" {
		t.Fatalf("first claim: %q, %v (want each site's head: a, b)", sites(first), err)
	}
	if again, err := store.Claim(ctx, sub, 10, time.Minute); err != nil || len(again) != 0 {
		t.Fatalf("claimed while leased, or a site's next before its head: %q, %v", sites(again), err)
	}
	// a's head fails (retried later); b's is delivered.
	if err := store.Record(ctx, first[0], outboxstore.Outcome{Result: outboxstore.Failed, At: time.Now(),
		StatusCode: 503, Error: "receiver answered 503", Retry: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := store.Record(ctx, first[1], outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}); err != nil {
		t.Fatal(err)
	}
	if next, err := store.Claim(ctx, sub, 10, time.Minute); err != nil || len(next) != 0 {
		t.Fatalf("a's second event claimed before its first was delivered: %q, %v", sites(next), err)
	}
	due, at, err := store.Due(ctx, []string{sub})
	if err != nil || len(due) != 0 || at.Before(time.Now().Add(50*time.Minute)) {
		t.Fatalf("due %v at %v, %v: want none, the retry in an hour", due, at, err)
	}
	// Given up (the horizon passed): a's next event is claimable.
	if err := store.Record(ctx, first[0], outboxstore.Outcome{Result: outboxstore.Failed, At: time.Now()}); err != nil {
		t.Fatal(err)
	}
	if _, err := testDB.Pool.Exec(ctx, `UPDATE notification_deliveries SET state = 'given_up' WHERE subscription_uid = $1
		AND event_seq = $2`, sub, first[0].Seq); err != nil {
		t.Fatal(err)
	}
	next, err := store.Claim(ctx, sub, 10, 0)
	if err != nil || sites(next) != "a" || next[0].Seq <= first[0].Seq {
		t.Fatalf("after a's head was given up: %q, %v", sites(next), err)
	}
	// A lease of 0 has expired at once: another worker claims the event again (a worker that
	// died mid-delivery), with the same id.
	again, err := store.Claim(ctx, sub, 10, time.Minute)
	if err != nil || len(again) != 1 || again[0].Event.ID != next[0].Event.ID {
		t.Fatalf("claimed again after the lease: %+v, %v", again, err)
	}
	stats, err := store.StatsOf(ctx, sub)
	if err != nil || stats.Delivered != 1 || stats.FailedAttempts != 2 || stats.ConsecutiveFailures != 1 {
		t.Errorf("stats %+v, %v", stats, err)
	}
	attempts, err := store.Attempts(ctx, sub, 10)
	if err != nil || len(attempts) != 3 || attempts[2].StatusCode != 503 || attempts[2].Error == "" {
		t.Errorf("attempts (newest first) %+v, %v", attempts, err)
	}
}

// An outcome that comes after its claim's lease ended, the event claimed again meanwhile, settles
// nothing: the new claim's holder posts the event again and records that. Settled by the stale
// outcome, the site's next event could be claimed and posted before the new claim's post of
// this one: the receiver would get the site's events out of order (a, then b, then a again).
func TestAStaleOutcomeSettlesNothing(t *testing.T) {
	ctx := context.Background()
	o, sub := org(), uuid.NewString()
	if err := store.Add(ctx, o, stamp(change("a", events.EnrolmentActive), change("a", events.EnrolmentWithdrawn))); err != nil {
		t.Fatal(err)
	}
	if fanned := fanOut(t, o, sub); fanned < 2 {
		t.Fatalf("fanned out %d events", fanned)
	}
	// A lease of 0 has ended at once: the event is claimed again, under a lease of its own.
	stale, err := store.Claim(ctx, sub, 10, 0)
	if err != nil || len(stale) != 1 {
		t.Fatalf("first claim: %d, %v", len(stale), err)
	}
	current, err := store.Claim(ctx, sub, 10, time.Minute)
	if err != nil || len(current) != 1 || current[0].Seq != stale[0].Seq {
		t.Fatalf("claimed again: %+v, %v", current, err)
	}
	if err := store.Record(ctx, stale[0], outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}); err != nil {
		t.Fatal(err)
	}
	if next, err := store.Claim(ctx, sub, 10, time.Minute); err != nil || len(next) != 0 {
		t.Fatalf("the site's next event claimed while its head is still another claim's: %q, %v", sites(next), err)
	}
	if err := store.Record(ctx, current[0], outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}); err != nil {
		t.Fatal(err)
	}
	next, err := store.Claim(ctx, sub, 10, time.Minute)
	if err != nil || len(next) != 1 || next[0].Seq <= current[0].Seq {
		t.Fatalf("after the current claim's outcome: %+v, %v (want the site's next event)", next, err)
	}
	stats, err := store.StatsOf(ctx, sub)
	if err != nil || stats.Delivered != 2 {
		t.Errorf("stats %+v, %v: both attempts logged and counted", stats, err)
	}
}

// TestForgetUnknown: the pending deliveries of a subscription nobody knows any more go once
// their events are older than any cache's lag; a known subscription's, and fresh ones, stay.
func TestForgetUnknown(t *testing.T) {
	ctx := context.Background()
	o, known, unknown := org(), uuid.NewString(), uuid.NewString()
	old := events.Stamp(change("a", events.EnrolmentActive), time.Now().Add(-time.Hour))
	fresh := events.Stamp(change("b", events.EnrolmentActive), time.Now())
	if err := store.Add(ctx, o, []events.Event{old, fresh}); err != nil {
		t.Fatal(err)
	}
	fanOut(t, o, known, unknown)
	if err := store.ForgetUnknown(ctx, []string{known}, 10*time.Minute); err != nil {
		t.Fatal(err)
	}
	pending := func(uid string) int {
		var n int
		if err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM notification_deliveries WHERE subscription_uid = $1
			AND state = 'pending'`, uid).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	if pending(known) != 2 || pending(unknown) != 1 {
		t.Errorf("pending: known %d (want 2), unknown %d (want 1: the fresh one)", pending(known), pending(unknown))
	}
}

// TestRecordAllKeepsCountsAndOrder: outcomes recorded in one batch count exactly as recorded
// one by one (the consecutive failures restart after the batch's last delivery), log their
// attempts in the order they were made, leave a delivery settled by another worker as it is,
// and release each site's next event only once its head's outcome is recorded.
func TestRecordAllKeepsCountsAndOrder(t *testing.T) {
	ctx := context.Background()
	o, sub := org(), uuid.NewString()
	if err := store.Add(ctx, o, stamp(change("a", events.EnrolmentActive), change("b", events.EnrolmentActive),
		change("c", events.EnrolmentActive), change("d", events.EnrolmentActive), change("a", events.EnrolmentWithdrawn),
		change("b", events.EnrolmentWithdrawn))); err != nil {
		t.Fatal(err)
	}
	fanOut(t, o, sub)
	heads, err := store.Claim(ctx, sub, 10, time.Minute)
	if err != nil || sites(heads) != "abcd" {
		t.Fatalf("claimed %q, %v (want each site's head)", sites(heads), err)
	}
	// Another worker settled d already (its lease had expired): its row stays as it is.
	if err := store.Record(ctx, heads[3], outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 200}); err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	batch := []outboxstore.Settled{
		{Delivery: heads[0], Outcome: outboxstore.Outcome{Result: outboxstore.Failed, At: now, StatusCode: 500,
			Error: "receiver answered 500", Retry: time.Hour}},
		{Delivery: heads[1], Outcome: outboxstore.Outcome{Result: outboxstore.Delivered, At: now, StatusCode: 204}},
		{Delivery: heads[2], Outcome: outboxstore.Outcome{Result: outboxstore.GivenUp, At: now, StatusCode: 503,
			Error: "receiver answered 503"}},
		{Delivery: heads[3], Outcome: outboxstore.Outcome{Result: outboxstore.Failed, At: now, StatusCode: 502,
			Error: "receiver answered 502", Retry: time.Hour}},
	}
	if err := store.RecordAll(ctx, batch); err != nil {
		t.Fatal(err)
	}
	// b's head delivered: b's next is claimable; a's head waits for its retry, so a's next waits too.
	next, err := store.Claim(ctx, sub, 10, time.Minute)
	if err != nil || sites(next) != "b" || next[0].Seq <= heads[1].Seq {
		t.Fatalf("after the batch: %q, %v (want b's second event alone)", sites(next), err)
	}
	state := func(seq int64) (s string, attempts int) {
		if err := testDB.Pool.QueryRow(ctx, `SELECT state, attempts FROM notification_deliveries WHERE subscription_uid = $1
			AND event_seq = $2`, sub, seq).Scan(&s, &attempts); err != nil {
			t.Fatal(err)
		}
		return s, attempts
	}
	for i, want := range []string{"pending", "delivered", "given_up", "delivered"} {
		if s, n := state(heads[i].Seq); s != want || n != 1 {
			t.Errorf("%s: %s after %d attempts, want %s after 1", heads[i].Event.SiteID, s, n, want)
		}
	}
	// Counts: d's first delivery, then the batch's four attempts (b delivered, a, c and the
	// stale d failed), two of them after b's delivery.
	stats, err := store.StatsOf(ctx, sub)
	if err != nil || stats.Delivered != 2 || stats.FailedAttempts != 3 || stats.GivenUp != 1 ||
		stats.ConsecutiveFailures != 2 || stats.Last != outboxstore.Failed || stats.LastStatus != 502 {
		t.Errorf("stats %+v, %v", stats, err)
	}
	attempts, err := store.Attempts(ctx, sub, 10)
	if err != nil || len(attempts) != 5 {
		t.Fatalf("attempts %+v, %v", attempts, err)
	}
	codes := make([]int, 0, len(attempts))
	for _, a := range attempts {
		codes = append(codes, a.StatusCode)
	}
	if fmt.Sprint(codes) != "[502 503 204 500 200]" {
		t.Errorf("attempts newest first: status codes %v, want [502 503 204 500 200]", codes)
	}
}

// insertIn writes a site's event in the caller's transaction, as a writer of credits does.
func insertIn(t *testing.T, q pgx.Tx, o, site, id string) {
	t.Helper()
	if _, err := q.Exec(context.Background(), `INSERT INTO outbox (organisation, site_id, event_type, event_id, payload)
		VALUES ($1, $2, 'enrolment.changed', $3, '{}')`, o, site, id); err != nil {
		t.Fatal(err)
	}
}

// TestCommitOrderAcrossTransactions: two writers of one site's events, the first to begin
// writing committing last. The later writer's event is not fanned out while the earlier one's
// transaction runs (Held says so); once it commits, the site's events are claimed in the order
// their writers began writing, not the order they committed.
func TestCommitOrderAcrossTransactions(t *testing.T) {
	ctx := context.Background()
	o, sub := org(), uuid.NewString()
	first, err := testDB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	insertIn(t, first, o, "a", "evt-first")
	second, err := testDB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	insertIn(t, second, o, "a", "evt-second")
	insertIn(t, second, o, "b", "evt-other-site")
	if err := second.Commit(ctx); err != nil {
		t.Fatal(err)
	}

	if n := fanOut(t, o, sub); n != 0 {
		t.Fatalf("fanned out %d events committed after a transaction still running began", n)
	}
	held, _, err := store.Held(ctx, nil)
	if err != nil || !held {
		t.Fatalf("Held: %v, %v; want the committed events held back", held, err)
	}
	var pid int
	if err := first.QueryRow(ctx, `SELECT pg_backend_pid()`).Scan(&pid); err != nil {
		t.Fatal(err)
	}
	if h, ok, err := store.HorizonHolder(ctx); err != nil || !ok || h.PID != pid {
		t.Errorf("HorizonHolder: %+v, %v, %v; want the first writer's session, pid %d", h, ok, err, pid)
	}
	if ds, err := store.Claim(ctx, sub, 10, time.Minute); err != nil || len(ds) != 0 {
		t.Fatalf("claimed %q, %v while the first writer runs", sites(ds), err)
	}

	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if held, _, err := store.Held(ctx, nil); err != nil || held {
		t.Fatalf("Held after the commit: %v, %v", held, err)
	}
	if n := fanOut(t, o, sub); n != 3 {
		t.Fatalf("fanned out %d events, want 3", n)
	}
	order := make([]string, 0, 3)
	for range 3 {
		ds, err := store.Claim(ctx, sub, 1, time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim: %+v, %v", ds, err)
		}
		order = append(order, ds[0].Event.ID)
		if err := store.Record(ctx, ds[0], outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}); err != nil {
			t.Fatal(err)
		}
	}
	// Both of the second writer's events come after the first's: the order is the writers'.
	if want := []string{"evt-first", "evt-second", "evt-other-site"}; !slices.Equal(order, want) {
		t.Errorf("claimed %v, want %v", order, want)
	}
}

// TestWrittenDeliveriesWaitForTheHorizon: events written with their delivery rows (WriteIn)
// by a transaction that began after another writer of the same site are not claimed while
// that writer runs (Held says so, for the subscription), though they are committed and
// fanned out; once it commits and its event is fanned out, the site's events are claimed in
// the order their writers began writing.
func TestWrittenDeliveriesWaitForTheHorizon(t *testing.T) {
	ctx := context.Background()
	o, sub := org(), uuid.NewString()
	first, err := testDB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = first.Rollback(ctx) }()
	insertIn(t, first, o, "a", "evt-first")
	second, err := testDB.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	evs := []events.Event{
		events.StampAs(change("a", events.EnrolmentActive), "evt-second", time.Now()),
		events.StampAs(change("b", events.EnrolmentActive), "evt-other-site", time.Now()),
	}
	if err := outboxstore.WriteIn(ctx, second, o, evs, outboxstore.Subscribers{Known: true, UIDs: []string{sub}}); err != nil {
		t.Fatal(err)
	}
	if err := second.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM notification_deliveries WHERE subscription_uid = $1`, sub).
		Scan(&rows); err != nil || rows != 2 {
		t.Fatalf("%d delivery rows committed with the events, %v; want 2", rows, err)
	}
	if ds, err := store.Claim(ctx, sub, 10, time.Minute); err != nil || len(ds) != 0 {
		t.Fatalf("claimed %q, %v while an earlier writer runs", sites(ds), err)
	}
	if due, _, err := store.Due(ctx, []string{sub}); err != nil || len(due) != 0 {
		t.Fatalf("Due: %v, %v while an earlier writer runs", due, err)
	}
	if held, _, err := store.Held(ctx, []string{sub}); err != nil || !held {
		t.Fatalf("Held: %v, %v; want the written deliveries held back", held, err)
	}
	if err := first.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if held, _, err := store.Held(ctx, []string{sub}); err != nil || held {
		t.Fatalf("Held after the commit: %v, %v", held, err)
	}
	// The first writer's event is fanned out by the fan-out; until then its site's next waits.
	ds, err := store.Claim(ctx, sub, 10, time.Minute)
	if err != nil || len(ds) != 1 || ds[0].Event.ID != "evt-other-site" {
		t.Fatalf("claimed %+v, %v before the fan-out; want only the other site's event", ds, err)
	}
	if err := store.Record(ctx, ds[0], outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}); err != nil {
		t.Fatal(err)
	}
	if n := fanOut(t, o, sub); n != 1 {
		t.Fatalf("fanned out %d events, want the first writer's", n)
	}
	order := make([]string, 0, 2)
	for range 2 {
		ds, err := store.Claim(ctx, sub, 10, time.Minute)
		if err != nil || len(ds) != 1 {
			t.Fatalf("claim: %+v, %v; want one (the site's head)", ds, err)
		}
		order = append(order, ds[0].Event.ID)
		if err := store.Record(ctx, ds[0], outboxstore.Outcome{Result: outboxstore.Delivered, At: time.Now(), StatusCode: 204}); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"evt-first", "evt-second"}; !slices.Equal(order, want) {
		t.Errorf("site a's events claimed %v, want %v", order, want)
	}
}
