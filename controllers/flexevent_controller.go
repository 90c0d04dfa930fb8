package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/settlementstore"
	"github.com/flexsite/flexsite/internal/statuswrites"
	"github.com/flexsite/flexsite/internal/validation"
)

// FlexEventReconciler settles a FlexEvent's sites (internal/settlement's rules, written
// exactly once through internal/settlementstore) and summarises them in its status: sites
// settled, skipped by reason, total flex energy and credit, late readings. A site is settled
// as soon as the event has ended and its readings cover the window, the rest at the event's
// deadline; until then the event is requeued. The settlements live in the database and
// outlive the object.
//
// It also dispatches the event (docs/platform.md, "Dispatch: asking the devices";
// flexevent_dispatch.go): it issues the dispatches once when they are due, cancels the open ones
// when the event is deleted before its end (the flexsite.io/dispatches finalizer), and counts them
// in the status.
type FlexEventReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	Store    *settlementstore.Store
	// Dispatches are the dispatches' store and AssetEvents what the devices told (the same
	// database; both required).
	Dispatches  *dispatchstore.Store
	AssetEvents *asseteventstore.Store
	// PublicURL is the scheme and host the dispatches' status callbacks point at (empty:
	// DefaultPublicURL).
	PublicURL string
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Poll is how often an event waiting for readings looks again (default 1 minute), and
	// LateWatch how long after its deadline a settled event keeps counting late readings
	// (default 7 days, every 10 polls).
	Poll, LateWatch time.Duration
	written         statuswrites.Writes
}

// +kubebuilder:rbac:groups=flexsite.io,resources=flexevents,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=flexevents/finalizers,verbs=update
// +kubebuilder:rbac:groups=flexsite.io,resources=flexevents/status,verbs=get;update;patch

// Reconcile fetches the event, settles what can be settled, and patches its status once.
func (r *FlexEventReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ev := &flexv1.FlexEvent{}
	if done, res, err := r.written.Fetch(ctx, r.Client, req.NamespacedName, ev); done {
		return res, err
	}
	if !ev.DeletionTimestamp.IsZero() {
		return r.release(ctx, ev)
	}
	patched, err := r.ensureDispatchFinalizer(ctx, ev, r.Now())
	if apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if patched {
		r.written.Wrote(ev) // the next reconcile waits for the cache to show the finalizer
	}
	base := ev.DeepCopy()
	err = r.reconcile(ctx, ev)
	res, perr := summary{client: r.Client, recorder: r.Recorder, written: &r.written}.patch(ctx, base, ev,
		fmt.Sprintf("%d sites settled, %d skipped%s", ev.Status.SitesSettled, skippedSites(ev.Status),
			dispatchMessage(ev.Status.Dispatches)), err)
	if err == nil && perr == nil && res.IsZero() && r.Now().Before(ev.Spec.DeadlineOrDefault().Add(r.lateWatch())) {
		res.RequeueAfter = 10 * r.poll() // late readings keep being counted for a while
	}
	return res, perr
}

func (r *FlexEventReconciler) poll() time.Duration {
	if r.Poll > 0 {
		return r.Poll
	}
	return time.Minute
}

func (r *FlexEventReconciler) lateWatch() time.Duration {
	if r.LateWatch > 0 {
		return r.LateWatch
	}
	return 7 * 24 * time.Hour
}

func skippedSites(st flexv1.FlexEventStatus) int32 {
	var n int32
	for _, s := range st.SitesSkipped {
		n += s.Sites
	}
	return n
}

// reconcile settles the event's due sites and writes its totals into ev's status.
func (r *FlexEventReconciler) reconcile(ctx context.Context, ev *flexv1.FlexEvent) error {
	now := r.Now()
	rate, err := validation.ParseFlexRate(ev.Spec.RatePencePerKWh)
	if err != nil {
		return stalled("InvalidRate", err.Error())
	}
	rules := settlement.Event{Start: ev.Spec.StartAt.UTC(), End: ev.Spec.EndAt.UTC(),
		Direction: settlement.Direction(ev.Spec.Direction), RateCentipence: rate}
	if err := settlement.CheckEvent(rules); err != nil {
		return stalled("InvalidWindow", err.Error())
	}
	due, err := r.dispatch(ctx, ev, now)
	if err != nil {
		return err
	}
	if now.Before(rules.Start) {
		after := rules.Start.Sub(now)
		if !due.IsZero() {
			after = min(after, due.Sub(now)) // its dispatches fall due first
		}
		return waiting(after, flexv1.ReasonEventNotEnded, "The event has not started"+dispatchMessage(ev.Status.Dispatches))
	}
	org, eventID := ev.Namespace, ev.Name
	sites, err := r.targets(ctx, ev)
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(sites))
	for id := range sites {
		ids = append(ids, id)
	}
	// A site once a target stays one (its enrolment may end before it is settled).
	recorded, err := r.Store.AddTargets(ctx, org, eventID, ids)
	if err != nil {
		return err
	}
	if now.Before(rules.End) {
		return waiting(rules.End.Sub(now), flexv1.ReasonEventNotEnded,
			fmt.Sprintf("The event ends at %s; %d sites to settle", rules.End.Format(time.RFC3339), len(recorded)))
	}
	done, err := r.Store.OfEvent(ctx, org, eventID)
	if err != nil {
		return err
	}
	deadline := ev.Spec.DeadlineOrDefault()
	final := !now.Before(deadline)
	var todo []settlementstore.Site
	for _, id := range recorded {
		if _, ok := done[id]; ok {
			continue
		}
		site, ok := sites[id]
		if !ok {
			site = settlementstore.Site{Source: settlementstore.Source{SiteID: id}}
		}
		todo = append(todo, site)
	}
	pending, err := r.Store.SettleSites(ctx, org, settlementstore.EventOf(eventID, rules), rules, todo, final)
	if err != nil {
		return err
	}
	totals, err := r.Store.EventTotals(ctx, org, eventID)
	if err != nil {
		return err
	}
	setTotals(&ev.Status, totals)
	if pending > 0 {
		return waiting(min(r.poll(), deadline.Sub(now)), flexv1.ReasonAwaitingReadings,
			fmt.Sprintf("%d sites wait for readings covering the event, until %s", pending, deadline.Format(time.RFC3339)))
	}
	return nil
}

func setTotals(st *flexv1.FlexEventStatus, t settlementstore.Totals) {
	st.SitesSettled, st.FlexWh, st.CreditPence, st.LateReadings = t.Settled, t.FlexWh, t.CreditPence, t.LateReadings
	st.SitesSkipped = nil
	for _, reason := range []settlement.Reason{settlement.InsufficientHistory, settlement.InsufficientReadings,
		settlement.TransactionIDTaken} {
		if n := t.Skipped[reason]; n > 0 {
			st.SitesSkipped = append(st.SitesSkipped, flexv1.FlexSkippedSites{Reason: flexv1.FlexSkipReason(reason), Sites: n})
		}
	}
}

// targets are the event's sites by API id: spec.siteNames, else every site with an active
// enrolment in the proposition at the event's start; each with its boundary meters and the
// days of the other events that name it.
func (r *FlexEventReconciler) targets(ctx context.Context, ev *flexv1.FlexEvent) (map[string]settlementstore.Site, error) {
	names, err := r.targetNames(ctx, ev)
	if err != nil {
		return nil, err
	}
	others := &flexv1.FlexEventList{}
	if err := r.List(ctx, others, client.InNamespace(ev.Namespace)); err != nil {
		return nil, err
	}
	out := make(map[string]settlementstore.Site, len(names))
	for _, name := range names {
		site := &flexv1.Site{}
		id := name
		err := r.Get(ctx, types.NamespacedName{Namespace: ev.Namespace, Name: name}, site)
		switch {
		case err == nil && site.Labels[flexv1.IDLabel] != "":
			id = site.Labels[flexv1.IDLabel]
		case err != nil && client.IgnoreNotFound(err) != nil:
			return nil, err
		}
		boundary, err := householdstore.BoundaryMeterIDs(ctx, r.Client, ev.Namespace, name)
		if err != nil {
			return nil, err
		}
		days := map[settlement.Date]bool{}
		for i := range others.Items {
			o := &others.Items[i]
			if o.Name == ev.Name || !slices.Contains(o.Spec.SiteNames, name) {
				continue
			}
			for d := range settlementstore.EventDays([]settlementstore.Window{{Start: o.Spec.StartAt.Time, End: o.Spec.EndAt.Time}}) {
				days[d] = true
			}
		}
		rated, err := householdstore.RatedPowerW(ctx, r.Client, ev.Namespace, name)
		if err != nil {
			return nil, err
		}
		out[id] = settlementstore.Site{Source: settlementstore.Source{SiteID: id, BoundaryAssetIDs: boundary},
			OtherEventDays: days, RatedPowerW: rated}
	}
	return out, nil
}

// targetNames are the names of the event's sites: spec.siteNames, else every site with an
// active enrolment in the proposition at the event's start. Settlement and dispatch both
// read them.
func (r *FlexEventReconciler) targetNames(ctx context.Context, ev *flexv1.FlexEvent) ([]string, error) {
	if len(ev.Spec.SiteNames) > 0 {
		return ev.Spec.SiteNames, nil
	}
	return enrolledAt(ctx, r.Client, ev.Namespace, ev.Spec.Proposition, ev.Spec.StartAt.Time)
}

// enrolledAt are the names of the sites with an active enrolment in the proposition at t.
func enrolledAt(ctx context.Context, c client.Reader, namespace string, p flexv1.PropositionName, t time.Time) ([]string, error) {
	list := &flexv1.EnrolmentList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	var out []string
	for i := range list.Items {
		e := &list.Items[i]
		if !household.TakesPartIn(e, p, t) {
			continue
		}
		out = append(out, e.Spec.SiteName)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// SetupWithManager watches FlexEvents' spec and deletion, and the dispatches' changes in
// PostgreSQL (a status reported back, on any replica); time (the dispatches falling due, the
// event's end, its deadline, readings arriving) brings the rest through requeues.
func (r *FlexEventReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Store == nil || r.Dispatches == nil || r.AssetEvents == nil {
		return errNoDatabase
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	changed := make(chan event.GenericEvent, 1024)
	if err := mgr.Add(leaderRunnable(r.listenDispatches(changed))); err != nil {
		return err
	}
	deleted := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.FlexEvent{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleted))).
		Named("flexevent").
		WithOptions(opts).
		WatchesRawSource(source.Channel(changed, &handler.EnqueueRequestForObject{})).
		Complete(r)
}
