package controllers_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
)

// dispatchSite creates a site whose status (the Site controller's, written here by hand)
// judges each named asset eligible or not for limited_pause, and the assets themselves.
func (f *flexFixture) dispatchSite(ns, name string, consent bool, assets map[string]bool, mutate map[string]func(*flexv1.Asset)) {
	f.t.Helper()
	s := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{flexv1.IDLabel: "id-" + name}},
		Spec: flexv1.SiteSpec{MPAN: "", Postcode: "SW1A 1AA"}}
	if consent {
		s.Spec.DispatchMethods = []flexv1.DispatchMethod{"limited_pause"}
	}
	if err := f.env.Client.Create(f.ctx, s); err != nil {
		f.t.Fatal(err)
	}
	names := make([]string, 0, len(assets))
	for a := range assets {
		names = append(names, a)
	}
	slices.Sort(names)
	for _, a := range names {
		obj := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: a, Labels: map[string]string{flexv1.IDLabel: a}},
			Spec: flexv1.AssetSpec{SiteName: name, ExternalID: "ext-" + a, Type: flexv1.AssetTypeCharger, PowerW: ptr.To[int64](7400)}}
		if m := mutate[a]; m != nil {
			m(obj)
		}
		if err := f.env.Client.Create(f.ctx, obj); err != nil {
			f.t.Fatal(err)
		}
		f.waitCached(obj)
		s.Status.Assets = append(s.Status.Assets, flexv1.AssetEligibility{Name: a, ID: a, ExternalID: "ext-" + a,
			Propositions: []flexv1.PropositionEligibility{{Proposition: "limited_pause", Eligible: assets[a]}}})
	}
	s.Status.ObservedGeneration = 1
	if err := f.env.Client.Status().Update(f.ctx, s); err != nil {
		f.t.Fatal(err)
	}
	f.until("site "+name+"'s status is in the cache", func() bool {
		got := &flexv1.Site{}
		return f.client.Get(f.ctx, client.ObjectKeyFromObject(s), got) == nil && len(got.Status.Assets) == len(assets)
	})
}

func (f *flexFixture) dispatchEvent(ns, name string, start time.Time, d flexv1.FlexDirection, sites ...string) *flexv1.FlexEvent {
	f.t.Helper()
	ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: flexv1.FlexEventSpec{Proposition: "limited_pause", StartAt: metav1.NewTime(start),
			EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: d, RatePencePerKWh: "25", SiteNames: sites}}
	if err := f.env.Client.Create(f.ctx, ev); err != nil {
		f.t.Fatal(err)
	}
	f.waitCached(ev)
	return ev
}

// reconcileUntil reconciles the event until its status (read from the API server) satisfies
// ok, and waits for the cache to show it.
func (f *flexFixture) reconcileUntil(r *controllers.FlexEventReconciler, ev *flexv1.FlexEvent, what string,
	ok func(*flexv1.FlexEvent) bool) *flexv1.FlexEvent {
	f.t.Helper()
	got := &flexv1.FlexEvent{}
	f.until(ev.Name+" is "+what, func() bool {
		if _, err := f.reconcile(r, ev); err != nil {
			f.t.Fatalf("reconciling %s: %v", ev.Name, err)
		}
		if err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(ev), got); err != nil {
			f.t.Fatal(err)
		}
		return ok(got)
	})
	f.waitCached(got)
	return got
}

// dispatchRows are an event's dispatches in the database: asset → "status level".
func (f *flexFixture) dispatchRows(ns, event string) map[string]string {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, `SELECT asset_id, status, level_kw FROM dispatches
		WHERE organisation = $1 AND flex_event = $2`, ns, event)
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var asset, status string
		var level float64
		if err := rows.Scan(&asset, &status, &level); err != nil {
			f.t.Fatal(err)
		}
		out[asset] = fmt.Sprintf("%s %g", status, level)
	}
	return out
}

func (f *flexFixture) outboxOf(ns string, t flexv1.EventType) []string {
	f.t.Helper()
	rows, err := f.db.Pool.Query(f.ctx, `SELECT payload::text FROM outbox WHERE organisation = $1 AND event_type = $2 ORDER BY id`,
		ns, string(t))
	if err != nil {
		f.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			f.t.Fatal(err)
		}
		out = append(out, p)
	}
	return out
}

// Who is asked, and why the others are not: the controller issues an event declared three
// days ahead only 24 h before its start, once (a second reconcile, or a second replica,
// issues nothing), at each asset's level, with every skip counted in the status; a reported
// status reaches the counts; deleting the event before its end cancels the open dispatches
// (dispatch.cancelled) and lets it go. A backdated event is never dispatched.
func TestFlexEventIssuesCountsAndCancelsDispatches(t *testing.T) {
	f := newFlexFixture(t)
	ns, err := f.env.Namespace(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	battery := func(a *flexv1.Asset) { a.Spec.Type = flexv1.AssetTypeBattery; a.Spec.PowerW = ptr.To[int64](5000) }
	f.dispatchSite(ns, "consenting", true, map[string]bool{
		"charger": true, "battery": true, "custom": true, "unplugged": true, "replugged": true, "charging-now": true,
		"charge-now-ended": true, "charge-now-deleted": true, "unrated": true, "ineligible": false,
	}, map[string]func(*flexv1.Asset){
		"battery": battery,
		"custom":  func(a *flexv1.Asset) { battery(a); a.Spec.CustomDispatchPowerW = ptr.To[int64](3000) },
		"unrated": func(a *flexv1.Asset) { a.Spec.Type = flexv1.AssetTypeHeatPump; a.Spec.PowerW = nil },
	})
	f.dispatchSite(ns, "unconsenting", false, map[string]bool{"other-charger": true}, nil)

	created := time.Now().UTC()
	start := created.Truncate(30*time.Minute).AddDate(0, 0, 3)
	events := &asseteventstore.Store{Pool: f.db.Pool}
	for _, e := range []asseteventstore.Event{
		{AssetID: "unplugged", Type: asseteventstore.PlugIn}, {AssetID: "unplugged", Type: asseteventstore.PlugOut},
		{AssetID: "replugged", Type: asseteventstore.PlugOut}, {AssetID: "replugged", Type: asseteventstore.PlugIn},
		{AssetID: "charging-now", Type: asseteventstore.ChargeNow, EndAt: ptr.To(start.Add(10 * time.Minute))},
		{AssetID: "charge-now-ended", Type: asseteventstore.ChargeNow, EndAt: ptr.To(start.Add(-time.Minute))},
		{AssetID: "charge-now-deleted", Type: asseteventstore.ChargeNow, EndAt: ptr.To(start.Add(time.Hour))},
		{AssetID: "charge-now-deleted", Type: asseteventstore.ChargeNowDeleted},
	} {
		if err := events.Append(f.ctx, ns, e); err != nil {
			t.Fatal(err)
		}
	}
	ev := f.dispatchEvent(ns, "ahead", start, flexv1.FlexTurnDown, "consenting", "unconsenting")
	due := f.checkIssuedAtLead(ns, ev, created, start, events)
	// Each dispatch keeps its flex event's proposition (the OpenADR event's programID).
	var kept, all int
	if err := f.db.Pool.QueryRow(f.ctx, `SELECT count(*) FILTER (WHERE proposition = 'limited_pause'), count(*)
		FROM dispatches WHERE organisation = $1 AND flex_event = $2`, ns, ev.Name).Scan(&kept, &all); err != nil {
		t.Fatal(err)
	}
	if all == 0 || kept != all {
		t.Fatalf("dispatches keeping their proposition: %d of %d", kept, all)
	}
	f.checkReportsAndCancellation(ns, ev, due, start)
	f.checkTurnUpAndBackdated(ns, created)
}

// checkIssuedAtLead: nothing issued three days ahead; at T−24 h, on two replicas, each asked
// asset once at its level, every skip counted, prod's DispatchEvent in the outbox; later
// reconciles (an asset plugged back in meanwhile) issue nothing. It answers when they were issued.
func (f *flexFixture) checkIssuedAtLead(ns string, ev *flexv1.FlexEvent, created, start time.Time,
	events *asseteventstore.Store) time.Time {
	t := f.t
	t.Helper()
	// Three days ahead: nothing issued yet, the event is looked at again when they fall due.
	early := f.reconciler(created)
	res, err := f.reconcile(early, ev)
	if err != nil {
		t.Fatal(err)
	}
	got := f.reconcileUntil(early, ev, "counted", func(e *flexv1.FlexEvent) bool { return e.Status.Dispatches != nil })
	if got.Status.Dispatches.IssuedAt != nil || got.Status.Dispatches.Issued != 0 || len(f.dispatchRows(ns, ev.Name)) != 0 {
		t.Fatalf("issued three days ahead: %+v", got.Status.Dispatches)
	}
	if due := start.Add(-dispatch.Lead).Sub(created); res.RequeueAfter <= 0 || res.RequeueAfter > due {
		t.Fatalf("requeued after %v, want at most %v (when the dispatches fall due)", res.RequeueAfter, due)
	}
	if !controllerutil.ContainsFinalizer(got, flexv1.DispatchFinalizer) {
		t.Fatalf("no dispatch finalizer on an event that has not ended: %v", got.Finalizers)
	}

	// 24 h before the start, on two replicas: issued once.
	due := start.Add(-dispatch.Lead).Add(time.Minute)
	r1, r2 := f.reconciler(due), f.reconciler(due)
	got = f.reconcileUntil(r1, ev, "issued", func(e *flexv1.FlexEvent) bool { return e.Status.Dispatches.IssuedAt != nil })
	if _, err := f.reconcile(r2, ev); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"charger": "requested 0", "battery": "requested 5", "custom": "requested 3",
		"replugged": "requested 0", "charge-now-ended": "requested 0", "charge-now-deleted": "requested 0"}
	if rows := f.dispatchRows(ns, ev.Name); fmt.Sprint(rows) != fmt.Sprint(want) {
		t.Fatalf("dispatches %v, want %v", rows, want)
	}
	d := got.Status.Dispatches
	wantSkipped := []flexv1.FlexSkippedAssets{{Reason: "not_plugged_in", Assets: 1}, {Reason: "charge_now", Assets: 1},
		{Reason: "no_dispatch_consent", Assets: 1}, {Reason: "no_power_rating", Assets: 1}}
	if d.Issued != 6 || d.Requested != 6 || fmt.Sprint(d.Skipped) != fmt.Sprint(wantSkipped) || d.Summary != "6 asked; 4 skipped" {
		t.Fatalf("status %+v", d)
	}
	requested := f.outboxOf(ns, flexv1.EventDispatchRequested)
	if len(requested) != 6 {
		t.Fatalf("%d dispatch.requested events, want 6", len(requested))
	}
	var first dispatch.Event
	for _, p := range requested {
		var e dispatch.Event
		if err := json.Unmarshal([]byte(p), &e); err != nil {
			t.Fatal(err)
		}
		if e.AssetID == "battery" {
			first = e
		}
	}
	id := dispatch.EventID(ns, ev.Name, "battery")
	wantEvent := dispatch.Event{EventID: id.String(), AssetID: "battery", IssuedTimestamp: dispatch.Stamp(due),
		EventTimestamp: dispatch.Stamp(ev.CreationTimestamp.Time), MarketID: "limited_pause", LevelKW: 5,
		FromTime: dispatch.Stamp(start), ToTime: dispatch.Stamp(start.Add(time.Hour)),
		UpdateStatusCallback: "https://flexsite.test/entities/asset/battery/callback/" + id.String()}
	if first != wantEvent {
		t.Fatalf("the battery's DispatchEvent\n%+v, want\n%+v", first, wantEvent)
	}

	// Later reconciles, even with another asset plugged back in, issue nothing again.
	if err := events.Append(f.ctx, ns, asseteventstore.Event{AssetID: "unplugged", Type: asseteventstore.PlugIn}); err != nil {
		t.Fatal(err)
	}
	later := f.reconciler(due.Add(time.Hour))
	for range 3 {
		if _, err := f.reconcile(later, ev); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.outboxOf(ns, flexv1.EventDispatchRequested)); n != 6 || len(f.dispatchRows(ns, ev.Name)) != 6 {
		t.Fatalf("reconciling again issued more: %d events, %v", n, f.dispatchRows(ns, ev.Name))
	}
	return due
}

// checkReportsAndCancellation: reported statuses reach the counts with no spec change; the
// event deleted before its end cancels the open dispatches and goes.
func (f *flexFixture) checkReportsAndCancellation(ns string, ev *flexv1.FlexEvent, due, start time.Time) {
	t := f.t
	t.Helper()
	later := f.reconciler(due.Add(time.Hour))

	// The asset controller reports back: the counts follow, with no change of the spec.
	store := &dispatchstore.Store{Pool: f.db.Pool}
	for _, rep := range []struct {
		asset  string
		status dispatch.Status
	}{{"charger", dispatch.Accepted}, {"charger", dispatch.Executed}, {"battery", dispatch.Rejected}, {"custom", dispatch.Accepted}} {
		at := due // when issued; EXECUTED only once the window has started
		if rep.status == dispatch.Executed {
			at = start
		}
		if _, err := store.Record(f.ctx, ns, dispatchstore.Report{AssetID: rep.asset, EventID: dispatch.EventID(ns, ev.Name, rep.asset),
			Status: rep.status, At: at, By: "test"}, at); err != nil {
			t.Fatal(err)
		}
	}
	got := f.reconcileUntil(later, ev, "counting the reports", func(e *flexv1.FlexEvent) bool { return e.Status.Dispatches.Executed == 1 })
	d := got.Status.Dispatches
	if d.Issued != 6 || d.Requested != 3 || d.Accepted != 1 || d.Rejected != 1 || d.Executed != 1 ||
		d.Summary != "6 asked: 1 accepted, 1 rejected, 1 executed; 4 skipped" {
		t.Fatalf("after the reports: %+v", d)
	}
	if got.Generation != ev.Generation {
		t.Fatalf("the spec changed: generation %d, was %d", got.Generation, ev.Generation)
	}

	// Deleted before its end: the open dispatches are cancelled, the others stay, the event goes.
	if err := f.env.Client.Delete(f.ctx, got); err != nil {
		t.Fatal(err)
	}
	deleting := f.reconciler(start.Add(-time.Hour))
	f.until("the deleted event is gone", func() bool {
		if _, err := f.reconcile(deleting, ev); err != nil {
			t.Fatal(err)
		}
		err := f.env.Client.Get(f.ctx, client.ObjectKeyFromObject(ev), &flexv1.FlexEvent{})
		return err != nil && client.IgnoreNotFound(err) == nil
	})
	cancelled := f.outboxOf(ns, flexv1.EventDispatchCancelled)
	if len(cancelled) != 4 || !strings.Contains(strings.Join(cancelled, " "), `"asset_id": "custom"`) {
		t.Fatalf("dispatch.cancelled events %v, want the 4 open ones (custom's among them)", cancelled)
	}
	counts, err := store.Counts(f.ctx, ns, ev.Name)
	if err != nil {
		t.Fatal(err)
	}
	if counts.ByStatus[dispatch.Cancelled] != 4 || counts.ByStatus[dispatch.Executed] != 1 || counts.ByStatus[dispatch.Rejected] != 1 {
		t.Fatalf("after the deletion: %+v", counts.ByStatus)
	}
}

// checkTurnUpAndBackdated: a turn-up event within 24 h of its start is issued at once at -P;
// a backdated one is never dispatched and carries no finalizer.
func (f *flexFixture) checkTurnUpAndBackdated(ns string, created time.Time) {
	t := f.t
	t.Helper()

	// Turning up, within 24 h of its start: issued at once, a charger at -P, a battery at -P.
	soon := f.dispatchEvent(ns, "soon", created.Truncate(30*time.Minute).Add(2*time.Hour), flexv1.FlexTurnUp, "consenting")
	// An event within 24 h of its start is due when it is created: the clock is read after its
	// creation (the test's start is earlier than its creationTimestamp whenever the phases
	// before took more than the second it is rounded to).
	f.reconcileUntil(f.reconciler(time.Now()), soon, "issued", func(e *flexv1.FlexEvent) bool {
		return e.Status.Dispatches != nil && e.Status.Dispatches.IssuedAt != nil
	})
	if rows := f.dispatchRows(ns, soon.Name); rows["charger"] != "requested -7.4" || rows["battery"] != "requested -5" ||
		rows["custom"] != "requested -3" || rows["unplugged"] != "requested -7.4" {
		t.Fatalf("turning up: %v", rows)
	}

	// Backdated: settled, never dispatched, and no finalizer once it has ended.
	past := f.dispatchEvent(ns, "backdated", created.Truncate(30*time.Minute).Add(-2*time.Hour), flexv1.FlexTurnDown, "consenting")
	got := f.reconcileUntil(f.reconciler(created), past, "counted", func(e *flexv1.FlexEvent) bool { return e.Status.Dispatches != nil })
	if got.Status.Dispatches.IssuedAt != nil || len(f.dispatchRows(ns, past.Name)) != 0 ||
		controllerutil.ContainsFinalizer(got, flexv1.DispatchFinalizer) {
		t.Fatalf("a backdated event: %+v, %v, finalizers %v", got.Status.Dispatches, f.dispatchRows(ns, past.Name), got.Finalizers)
	}
}
