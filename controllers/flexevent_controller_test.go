package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/resourceversion"
	"github.com/flexsite/flexsite/internal/rewardstore"
	"github.com/flexsite/flexsite/internal/settlementstore"
	"github.com/flexsite/flexsite/internal/testenv"
)

// flexFixture is one envtest control plane, one manager's cache and one real PostgreSQL
// database for the FlexEvent settlement tests: the reconcilers are driven by hand (several at
// once, as replicas would), with their own clock.
type flexFixture struct {
	t        *testing.T
	ctx      context.Context
	env      *testenv.Env
	client   client.Client
	cache    client.Reader
	db       *dbtest.Database
	recorder recorder.EventRecorder
}

// flexFixtureBound bounds one FlexEvent test, envtest's start included (about a minute on a
// loaded machine).
const flexFixtureBound = 5 * time.Minute

func newFlexFixture(t *testing.T) *flexFixture {
	t.Helper()
	if err := dbtest.Available(); err != nil {
		if fail, msg := dbtest.MissingVerdict(err); fail {
			t.Fatal(msg)
		} else {
			t.Skip(msg)
		}
	}
	// A bound on the fixture's whole life, for failure only: a reconcile stuck on a lock fails
	// the test with its context's error instead of hanging the package until go test's timeout.
	ctx, cancel := context.WithTimeout(context.Background(), flexFixtureBound)
	t.Cleanup(cancel)
	env, err := testenv.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	database, err := dbtest.New(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { database.Close(context.Background()) })
	mgr, err := env.NewManager()
	if err != nil {
		t.Fatal(err)
	}
	if err := index.Register(ctx, mgr.GetFieldIndexer()); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []client.Object{&flexv1.FlexEvent{}, &flexv1.Site{}, &flexv1.Asset{}, &flexv1.Enrolment{}} {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		t.Fatal("cache did not sync")
	}
	return &flexFixture{t: t, ctx: ctx, env: env, client: mgr.GetClient(), cache: mgr.GetCache(), db: database,
		recorder: mgr.GetEventRecorder("flexevent-test")}
}

// reconciler is one replica's FlexEvent reconciler, with its own pool and clock.
func (f *flexFixture) reconciler(now time.Time) *controllers.FlexEventReconciler {
	pool, err := db.Open(f.ctx, f.db.URL)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.reconcilerOn(pool, now)
}

// crashingReconciler is a replica whose pool calls crash, once, at the crash point: the
// settlement rows written inside their SQL transaction, before it commits.
func (f *flexFixture) crashingReconciler(now time.Time, crash func()) (*controllers.FlexEventReconciler, *crashPoint) {
	cfg, err := pgxpool.ParseConfig(f.db.URL)
	if err != nil {
		f.t.Fatal(err)
	}
	point := &crashPoint{crash: crash}
	cfg.ConnConfig.Tracer = point
	pool, err := pgxpool.NewWithConfig(f.ctx, cfg)
	if err != nil {
		f.t.Fatal(err)
	}
	return f.reconcilerOn(pool, now), point
}

func (f *flexFixture) reconcilerOn(pool *pgxpool.Pool, now time.Time) *controllers.FlexEventReconciler {
	f.t.Cleanup(pool.Close)
	return &controllers.FlexEventReconciler{Client: index.CachedClient{Client: f.client, Cache: f.cache}, Recorder: f.recorder,
		Store: &settlementstore.Store{Pool: pool}, Dispatches: &dispatchstore.Store{Pool: pool},
		AssetEvents: &asseteventstore.Store{Pool: pool}, PublicURL: "https://flexsite.test", Now: func() time.Time { return now }}
}

// crashPoint is a pgx tracer that injects a fault where a crash hurts most: once the statement
// inserting an event's settlement rows (and their credits) has succeeded, inside its SQL
// transaction, before the commit. reached tells the test the fault happened.
type crashPoint struct {
	crash   func()
	reached atomic.Bool
}

type tracedSQL struct{}

func (c *crashPoint) TraceQueryStart(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryStartData) context.Context {
	return context.WithValue(ctx, tracedSQL{}, data.SQL)
}

func (c *crashPoint) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, data pgx.TraceQueryEndData) {
	sql, _ := ctx.Value(tracedSQL{}).(string)
	if data.Err == nil && strings.Contains(sql, "INSERT INTO flex_event_settlements") && c.reached.CompareAndSwap(false, true) {
		c.crash()
	}
}

// targetsAndCredits are the event's recorded targets, and what credits() counts: what a crash
// left behind.
func (f *flexFixture) targetsAndCredits(org, eventID string) string {
	f.t.Helper()
	var targets int64
	const q = `SELECT count(*) FROM flex_event_targets WHERE organisation = $1 AND event_id = $2`
	err := f.db.Pool.QueryRow(f.ctx, q, org, eventID).Scan(&targets)
	for i := 0; db.Unavailable(err) && i < 10; i++ { // a connection from before an outage
		err = f.db.Pool.QueryRow(f.ctx, q, org, eventID).Scan(&targets)
	}
	if err != nil {
		f.t.Fatal(err)
	}
	settled, txs, pence, outbox := f.credits(org)
	return fmt.Sprintf("%d targets, %d settlements, %d transactions, %d pence, %d outbox events", targets, settled, txs, pence, outbox)
}

// A Tuesday in November (GMT: UK local time is UTC): 17:30–18:30, the spec's first example.
var (
	flexStart = time.Date(2026, 11, 17, 17, 30, 0, 0, time.UTC)
	flexEnd   = flexStart.Add(time.Hour)
)

// readings writes a site's boundary readings (kW, half-hourly) for the window's two
// half-hours on each of the days working days before the event day (1.8 and 2.6 kWh), and on
// the event day (0.4 and 2.9 kWh) unless eventDay is false.
func (f *flexFixture) readings(pool *pgxpool.Pool, org, siteID string, days int, eventDay bool) {
	f.t.Helper()
	type row struct {
		start time.Time
		kW    float64
	}
	var rows []row
	add := func(day time.Time, a, b float64) {
		rows = append(rows, row{day, a * 2}, row{day.Add(30 * time.Minute), b * 2})
	}
	for d, n := flexStart.AddDate(0, 0, -1), 0; n < days; d = d.AddDate(0, 0, -1) {
		if d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
			continue
		}
		add(d, 1.8, 2.6)
		n++
	}
	if eventDay {
		add(flexStart, 0.4, 2.9)
	}
	for _, r := range rows {
		if _, err := pool.Exec(f.ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
			VALUES ($1, $2, 'meter-'||$2, 'boundary_import_kw', $3, $4, $5)`,
			org, siteID, r.start, r.start.Add(30*time.Minute), r.kW); err != nil {
			f.t.Fatal(err)
		}
	}
}

func (f *flexFixture) event(ns, name string, sites []string, deadline *time.Time) *flexv1.FlexEvent {
	f.t.Helper()
	ev := &flexv1.FlexEvent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.FlexEventSpec{Proposition: "limited_pause", StartAt: metav1.NewTime(flexStart),
			EndAt: metav1.NewTime(flexEnd), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25", SiteNames: sites},
	}
	if deadline != nil {
		ev.Spec.Deadline = &metav1.Time{Time: *deadline}
	}
	if err := f.env.Client.Create(f.ctx, ev); err != nil {
		f.t.Fatal(err)
	}
	f.waitCached(ev)
	return ev
}

// until waits for done to hold (looked at every 20 ms, for at most 30 s: a loaded CI
// machine's cache and API server may lag), and fails the test with what it waited for.
func (f *flexFixture) until(what string, done func() bool) {
	f.t.Helper()
	if err := wait.PollUntilContextTimeout(f.ctx, 20*time.Millisecond, 30*time.Second, true,
		func(context.Context) (bool, error) { return done(), nil }); err != nil {
		f.t.Fatalf("waiting until %s: %v", what, err)
	}
}

// waitCached waits until the manager's cache holds obj at its resource version or a later one.
// obj is left as it is: copying the cache's version into it could hand the caller an object
// older than the one the API server just returned.
func (f *flexFixture) waitCached(obj client.Object) {
	f.t.Helper()
	want := obj.GetResourceVersion()
	f.until(obj.GetName()+"'s version "+want+" is in the cache", func() bool {
		got, ok := obj.DeepCopyObject().(client.Object)
		return ok && f.client.Get(f.ctx, client.ObjectKeyFromObject(obj), got) == nil &&
			resourceversion.NotOlder(got.GetResourceVersion(), want)
	})
}

func (f *flexFixture) reconcile(r *controllers.FlexEventReconciler, ev *flexv1.FlexEvent) (ctrl.Result, error) {
	return r.Reconcile(f.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ev)})
}

// settleUntilDone reconciles until the event's status reports total sites settled or skipped.
func (f *flexFixture) settleUntilDone(r *controllers.FlexEventReconciler, ev *flexv1.FlexEvent, total int32) *flexv1.FlexEvent {
	f.t.Helper()
	got := &flexv1.FlexEvent{}
	var lastErr error
	for range 100 {
		if _, err := f.reconcile(r, ev); err != nil {
			lastErr = err
		}
		if err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(ev), got); err != nil {
			f.t.Fatal(err)
		}
		var skipped int32
		for _, s := range got.Status.SitesSkipped {
			skipped += s.Sites
		}
		if got.Status.SitesSettled+skipped == total && meta.IsStatusConditionTrue(got.Status.Conditions, flexv1.ReadyCondition) {
			f.waitCached(got)
			return got
		}
		time.Sleep(50 * time.Millisecond)
	}
	f.t.Fatalf("event %s not settled (last reconcile error: %v): %+v", ev.Name, lastErr, got.Status)
	return nil
}

// credits counts the event's settlements, flex event transactions (and their sum) and
// outbox events.
func (f *flexFixture) credits(org string) (settlements, txs, pence, outbox int64) {
	f.t.Helper()
	q := func(sql string, out *int64) {
		err := f.db.Pool.QueryRow(f.ctx, sql, org).Scan(out)
		for i := 0; db.Unavailable(err) && i < 10; i++ { // a connection from before an outage
			err = f.db.Pool.QueryRow(f.ctx, sql, org).Scan(out)
		}
		if err != nil {
			f.t.Fatal(err)
		}
	}
	q(`SELECT count(*) FROM flex_event_settlements WHERE organisation = $1`, &settlements)
	q(`SELECT count(*) FROM reward_transactions WHERE organisation = $1 AND transaction_type = 'flex event'`, &txs)
	q(`SELECT coalesce(sum(credit_pence), 0) FROM reward_transactions WHERE organisation = $1`, &pence)
	q(`SELECT count(*) FROM outbox WHERE organisation = $1 AND event_type = 'rewards.transaction_credited'`, &outbox)
	return
}

func siteNames(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("site-%03d", i)
	}
	return out
}

// Three replicas settling one event at once, one of them killed mid-run and restarted: every
// site is settled and credited exactly once, and the status says so; late readings change
// no credit and are counted.
func TestFlexEventSettlesOnceAcrossReplicasAndRestarts(t *testing.T) {
	f := newFlexFixture(t)
	ns, err := f.env.Namespace(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 40
	sites := siteNames(n)
	for _, s := range sites {
		f.readings(f.db.Pool, ns, s, 12, true)
	}
	ev := f.event(ns, "ev-race", sites, nil)
	now := flexEnd.Add(time.Hour) // ended, before its deadline: every site's readings cover it

	// A replica killed mid-settlement: its context ends once its settlement rows are written,
	// before they commit.
	kctx, kill := context.WithCancel(f.ctx)
	defer kill()
	killed, point := f.crashingReconciler(now, kill)
	_, kerr := killed.Reconcile(kctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(ev)})
	if !point.reached.Load() || kerr == nil || !strings.Contains(kerr.Error(), context.Canceled.Error()) {
		t.Fatalf("the replica was not killed mid-settlement: crash point reached %v, reconcile error %v", point.reached.Load(), kerr)
	}
	// The half-done state: every target recorded, nothing credited (the kill came before the commit).
	if got, want := f.targetsAndCredits(ns, ev.Name), fmt.Sprintf(
		"%d targets, 0 settlements, 0 transactions, 0 pence, 0 outbox events", n); got != want {
		t.Fatalf("after the kill: %s; want %s", got, want)
	}

	// The replicas' own answers are not the claim (one may lose a status write to another, and
	// is retried): what they settled together is, checked below.
	var wg sync.WaitGroup
	for range 3 {
		r := f.reconciler(now)
		wg.Go(func() { _, _ = f.reconcile(r, ev) })
	}
	wg.Wait()
	restarted := f.reconciler(now)
	got := f.settleUntilDone(restarted, ev, n)

	settled, txs, pence, outbox := f.credits(ns)
	if settled != n || txs != n || outbox != n || pence != 35*n {
		t.Fatalf("settlements %d, transactions %d, outbox %d, pence %d; want %d, %d, %d, %d",
			settled, txs, outbox, pence, n, n, n, 35*n)
	}
	if got.Status.SitesSettled != n || got.Status.CreditPence != 35*n || got.Status.FlexWh != -1100*n {
		t.Fatalf("status %+v", got.Status)
	}
	ready := meta.FindStatusCondition(got.Status.Conditions, flexv1.ReadyCondition)
	if ready.ObservedGeneration != got.Generation {
		t.Fatalf("Ready observed generation %d, want %d", ready.ObservedGeneration, got.Generation)
	}

	// A late reading in a settled window: the credit stays, the status counts it.
	if _, err := f.db.Pool.Exec(f.ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
		VALUES ($1, 'site-000', 'meter-site-000', 'boundary_import_kw', $2, $3, 0)
		ON CONFLICT (organisation, site_id, asset_id, label, start_at, end_at)
		DO UPDATE SET value = EXCLUDED.value, received_at = now()`, ns, flexStart, flexStart.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.reconcile(restarted, ev); err != nil {
		t.Fatal(err)
	}
	late := &flexv1.FlexEvent{}
	if err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(ev), late); err != nil {
		t.Fatal(err)
	}
	if late.Status.LateReadings != 1 || late.Status.CreditPence != 35*n {
		t.Fatalf("after a late reading: %+v", late.Status)
	}
	if _, _, pence2, _ := f.credits(ns); pence2 != pence {
		t.Fatalf("a late reading changed the credits: %d, was %d", pence2, pence)
	}
}

// The database going away mid-run: the reconcile fails (and is retried); once it is back,
// settlement resumes and ends with every site credited once.
func TestFlexEventResumesAfterTheDatabaseComesBack(t *testing.T) {
	f := newFlexFixture(t)
	if !f.db.CanStop() {
		t.Skip("the test database is not this process's")
	}
	ns, err := f.env.Namespace(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	const n = 30
	sites := siteNames(n)
	for _, s := range sites {
		f.readings(f.db.Pool, ns, s, 12, true)
	}
	ev := f.event(ns, "ev-outage", sites, nil)
	// The database stops once the settlement rows are written, before they commit.
	var stopErr error
	r, point := f.crashingReconciler(flexEnd.Add(time.Hour), func() { stopErr = f.db.Stop() })
	_, rerr := f.reconcile(r, ev)
	if !point.reached.Load() || stopErr != nil {
		t.Fatalf("the database was not stopped mid-settlement: crash point reached %v, stop %v", point.reached.Load(), stopErr)
	}
	if !db.Unavailable(rerr) {
		t.Fatalf("the reconcile the database went away under answered %v, want the database unavailable", rerr)
	}
	// The next reconcile may first wait for the cache to show the status the failed one wrote
	// (no error, a requeue): the one after that reaches for the database.
	var again error
	if err := wait.PollUntilContextTimeout(f.ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		_, again = f.reconcile(r, ev)
		return again != nil, nil
	}); err != nil || !db.Unavailable(again) {
		t.Fatalf("a reconcile without the database answered %v (%v), want the database unavailable", again, err)
	}
	if err := f.db.Start(f.ctx); err != nil {
		t.Fatal(err)
	}
	// The half-done state: every target recorded, nothing credited (the outage came before the commit).
	if got, want := f.targetsAndCredits(ns, ev.Name), fmt.Sprintf(
		"%d targets, 0 settlements, 0 transactions, 0 pence, 0 outbox events", n); got != want {
		t.Fatalf("after the outage: %s; want %s", got, want)
	}
	got := f.settleUntilDone(r, ev, n)
	settled, txs, pence, outbox := f.credits(ns)
	if settled != n || txs != n || outbox != n || pence != 35*n || got.Status.CreditPence != 35*n {
		t.Fatalf("settlements %d, transactions %d, outbox %d, pence %d, status %+v", settled, txs, outbox, pence, got.Status)
	}
}

// A site whose readings do not cover the event waits until the deadline (Reconciling,
// AwaitingReadings), then is skipped; a site without history is skipped; a site enrolled in
// the proposition at the start is a target without being listed.
func TestFlexEventWaitsForReadingsUntilTheDeadline(t *testing.T) {
	f := newFlexFixture(t)
	ns, err := f.env.Namespace(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	f.readings(f.db.Pool, ns, "full", 12, true)
	f.readings(f.db.Pool, ns, "partial", 12, false)
	if _, err := f.db.Pool.Exec(f.ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
		VALUES ($1, 'partial', 'meter-partial', 'boundary_import_kw', $2, $3, 1)`,
		ns, flexStart, flexStart.Add(30*time.Minute)); err != nil {
		t.Fatal(err)
	}
	f.readings(f.db.Pool, ns, "new", 3, true)

	// "enrolled" is a target through its active enrolment (the enrolment's status is the
	// Enrolment controller's, written here by hand).
	f.readings(f.db.Pool, ns, "enrolled", 12, true)
	enr := &flexv1.Enrolment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "enrolled.limited-pause"},
		Spec: flexv1.EnrolmentSpec{SiteName: "enrolled", Proposition: "limited_pause"}}
	if err := f.env.Client.Create(f.ctx, enr); err != nil {
		t.Fatal(err)
	}
	enr.Status = flexv1.EnrolmentStatus{Phase: flexv1.EnrolmentActive, ObservedGeneration: 1,
		EnrolledAt: &metav1.Time{Time: flexStart.AddDate(0, -1, 0)}}
	if err := f.env.Client.Status().Update(f.ctx, enr); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(f.ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		return f.client.Get(ctx, client.ObjectKeyFromObject(enr), enr) == nil && enr.Status.Phase == flexv1.EnrolmentActive, nil
	}); err != nil {
		t.Fatalf("the cache never saw the enrolment active: %v (%+v)", err, enr.Status)
	}
	byEnrolment := f.event(ns, "ev-enrolled", nil, nil)
	f.settleUntilDone(f.reconciler(flexEnd.Add(time.Hour)), byEnrolment, 1)

	deadline := flexEnd.Add(6 * time.Hour)
	ev := f.event(ns, "ev-wait", []string{"full", "partial", "new"}, &deadline)
	before := f.reconciler(flexEnd.Add(time.Hour))
	res, err := f.reconcile(before, ev)
	if err != nil {
		t.Fatal(err)
	}
	waiting := &flexv1.FlexEvent{}
	if err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(ev), waiting); err != nil {
		t.Fatal(err)
	}
	rec := meta.FindStatusCondition(waiting.Status.Conditions, flexv1.ReconcilingCondition)
	if rec == nil || rec.Reason != flexv1.ReasonAwaitingReadings || res.RequeueAfter <= 0 {
		t.Fatalf("before the deadline: %+v, requeue %v", waiting.Status, res.RequeueAfter)
	}
	if waiting.Status.SitesSettled != 1 || len(waiting.Status.SitesSkipped) != 1 ||
		waiting.Status.SitesSkipped[0].Reason != flexv1.FlexInsufficientHistory {
		t.Fatalf("before the deadline: %+v", waiting.Status)
	}
	f.waitCached(waiting)
	got := f.settleUntilDone(f.reconciler(deadline.Add(time.Minute)), ev, 3)
	want := []flexv1.FlexSkippedSites{{Reason: flexv1.FlexInsufficientHistory, Sites: 1},
		{Reason: flexv1.FlexInsufficientReadings, Sites: 1}}
	if got.Status.SitesSettled != 1 || fmt.Sprint(got.Status.SitesSkipped) != fmt.Sprint(want) {
		t.Fatalf("after the deadline: %+v", got.Status)
	}
	// The window is recorded with the settlement: another event's baseline passes over its day.
	var start time.Time
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT start_at FROM flex_event_settlements
		WHERE organisation = $1 AND event_id = 'ev-wait' AND site_id = 'full'`, ns).Scan(&start); err != nil ||
		!start.Equal(flexStart) {
		t.Fatalf("settlement window: %v %v", start, err)
	}
}

// An API client of the organisation that posted a transaction under the id settlement derives
// for one site (a UUIDv5 of organisation, event and site) blocks neither the event's other
// sites nor any later reconcile, and is never paid over: that site is skipped as
// transaction_id_taken, which the FlexEvent's status (its CRD's enum) counts.
func TestFlexEventSettlesAroundATakenTransactionID(t *testing.T) {
	f := newFlexFixture(t)
	ns, err := f.env.Namespace(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	sites := siteNames(3)
	for _, s := range sites {
		f.readings(f.db.Pool, ns, s, 12, true)
	}
	ev := f.event(ns, "ev-taken", sites, nil)
	at := metav1.NewTime(flexStart)
	taken := flexv1.RewardTransaction{ID: settlementstore.TransactionID(ns, ev.Name, sites[1]).String(), Type: "goodwill credit",
		CreditPence: 7, StartTime: &at}
	ledger := &rewardstore.Store{Pool: f.db.Pool}
	if _, _, err := ledger.Append(f.ctx, rewardstore.Site{Namespace: ns, ID: sites[1]}, taken, rewardstore.SourceAPI); err != nil {
		t.Fatal(err)
	}
	r := f.reconciler(flexEnd.Add(time.Hour))
	got := f.settleUntilDone(r, ev, 3)
	if got.Status.SitesSettled != 2 || got.Status.CreditPence != 70 || len(got.Status.SitesSkipped) != 1 ||
		got.Status.SitesSkipped[0] != (flexv1.FlexSkippedSites{Reason: flexv1.FlexTransactionIDTaken, Sites: 1}) {
		t.Fatalf("status %+v: want 2 settled (70 p) and 1 skipped as transaction_id_taken", got.Status)
	}
	if _, err := f.reconcile(r, ev); err != nil {
		t.Fatalf("reconciling again: %v", err)
	}
	_, txs, pence, _ := f.credits(ns)
	if txs != 2 || pence != 70+7 {
		t.Fatalf("%d flex event transactions, %d p in all; want 2 and 77: the taken site never credited by settlement", txs, pence)
	}
}
