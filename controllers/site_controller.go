package controllers

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers/metadata"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/pagestore"
	"github.com/flexsite/flexsite/internal/priority"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/statuswrites"
)

// SiteReconciler computes a Site's eligibility into its status, from the site's Assets, the
// Propositions and the AssetModel catalogue, and cleans up a deleted Site's children.
type SiteReconciler struct {
	client.Client
	// APIReader reads past the cache: a deleted site's children are listed from the API
	// server so that one created a moment ago is not missed and left behind.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Notifier writes the site's events to the outbox.
	Notifier notifier
	// Background, when set, thins out the re-evaluations a catalogue change fans out to
	// while interactive requests are in flight (see internal/priority).
	Background *priority.Gate
	// fanout holds the sites queued by a catalogue change and not reconciled since.
	fanout sync.Map
	// written: this reconciler's status writes the cache has yet to show.
	written statuswrites.Writes
	// BankDetails forgets a deleted site's bank details (kept in PostgreSQL). Required.
	BankDetails *pagestore.Store
	// Shard, when set, is the replica's part of the ring: only its sites are reconciled here.
	Shard *shards.Replica
}

// +kubebuilder:rbac:groups=flexsite.io,resources=sites,verbs=get;list;watch;update;patch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=sites/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=sites/finalizers,verbs=update
// +kubebuilder:rbac:groups=flexsite.io,resources=assets;enrolments;rewardledgers;mpanclaims,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=mpanclaims,verbs=create
// +kubebuilder:rbac:groups=flexsite.io,resources=assets;enrolments;rewardledgers;deviceconnections,verbs=patch
// +kubebuilder:rbac:groups=flexsite.io,resources=propositions;assetmodels,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the Site, ensures its finalizer and id, computes its eligibility and
// writes the status in one patch (only when it changed, so a resync writes nothing).
func (r *SiteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if _, fanout := r.fanout.LoadAndDelete(req.NamespacedName); fanout && r.Background != nil {
		release, err := r.Background.Slot(ctx)
		defer release()
		if err != nil {
			return ctrl.Result{}, err
		}
	}
	site := &flexv1.Site{}
	if done, res, err := r.written.Fetch(ctx, r.Client, req.NamespacedName, site); done {
		return res, err
	}
	sum := summary{client: r.Client, recorder: r.Recorder, written: &r.written}
	if !site.DeletionTimestamp.IsZero() {
		base := site.DeepCopy()
		return sum.patch(ctx, base, site, "", r.finalize(ctx, site))
	}
	err := metadata.Ensure(ctx, r.Client, site, true, true)
	base := site.DeepCopy()
	var claimsPending time.Duration
	if err == nil {
		err = r.reconcile(ctx, site)
	}
	if err == nil {
		// The events of this evaluation are written before its status: when they cannot be,
		// nothing is written and the evaluation is tried again (its events with it).
		if rerr := r.Notifier.report(ctx, site, "site", events.SiteEvents(base, site), r.Now()); rerr != nil {
			return ctrl.Result{}, rerr
		}
	}
	if err == nil {
		// A claim of another meter point than the site holds is a change on its way, or one
		// that died half-way: released once stale, looked at again when it turns stale.
		claimsPending, err = householdstore.ReleaseClaims(ctx, r.Client, r.Client, site, r.Now())
	}
	if errors.Is(err, errAbandoned) {
		return ctrl.Result{}, nil
	}
	res, err := sum.patch(ctx, base, site, "Eligibility is up to date", err)
	if claimsPending > 0 && (res.RequeueAfter == 0 || claimsPending < res.RequeueAfter) {
		res.RequeueAfter = claimsPending
	}
	return res, err
}

// errAbandoned: the site was deleted as a request's half-written leftover; nothing to report.
var errAbandoned = errors.New("abandoned site deleted")

// reconcile waits for a site still being written by its request, and otherwise evaluates
// the site's eligibility into its status.
func (r *SiteReconciler) reconcile(ctx context.Context, site *flexv1.Site) error {
	state, wait, err := householdstore.CheckInFlight(ctx, householdstore.Readers{Cached: r.Client, Fresh: r.APIReader}, site, r.Now())
	switch {
	case err != nil:
		return err
	case state == household.Writing:
		// Publish nothing about a half-written site; look again at the deadline (or sooner,
		// when the objects it waits for arrive).
		return waitingBriefly(wait, flexv1.ReasonProvisioning, "The request that created this site is still writing it")
	case state == household.Abandoned:
		r.Recorder.Eventf(site, nil, corev1.EventTypeWarning, "AbandonedOnboard", "Delete",
			"The request that created this site did not finish writing it; deleting the half-written site")
		if err := r.Delete(ctx, site); client.IgnoreNotFound(err) != nil {
			return err
		}
		return errAbandoned
	}
	// A site declared by kubectl or GitOps under a name that does not hold its MPAN holds it by
	// a claim, made here (the REST API makes its own); a site that already holds it is left alone.
	if err := householdstore.ClaimDeclared(ctx, r.Client, r.APIReader, site, r.Now()); err != nil {
		var taken *household.MPANTakenError
		switch {
		case errors.As(err, &taken) && taken.Pending:
			return waiting(household.ClaimGrace, flexv1.ReasonMPANTaken, taken.Error())
		case errors.As(err, &taken):
			// Looked at again when the holder's claim, or the holder, goes (claimsChanged, othersOfMPAN).
			return stalled(flexv1.ReasonMPANTaken, taken.Error()+": change this site's MPAN, or delete the other site")
		}
		return err
	}
	found, err := index.NewLookup(r.Client).AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return err
	}
	// A site can reach a shard's cache before its assets do (the sharder moves a departed
	// shard's sites before their children): evaluated from the cache alone, it would be
	// published as having lost them (docs/scale.md, "Shards within a cluster"). An asset the
	// last evaluation held that the cache lacks is read from the API server by name, and while
	// it is there, live and the site's, it is evaluated as read: the status written is the
	// household's at once, not a wait for the asset's arrival.
	transit, err := r.assetsInTransit(ctx, site, found)
	if err != nil {
		return err
	}
	// Its children carry it as their controller: that puts them on its shard. Those the REST
	// API writes have it from their create; those written without it (kubectl, GitOps, older
	// data) are adopted here, one patch each. An asset on its way was adopted by the
	// evaluation that held it.
	if err := householdstore.AdoptChildren(ctx, r.Client, site, found); err != nil {
		return err
	}
	assets := &flexv1.AssetList{Items: make([]flexv1.Asset, len(found), len(found)+len(transit))}
	for i, a := range found {
		a.DeepCopyInto(&assets.Items[i])
	}
	for _, a := range transit {
		assets.Items = append(assets.Items, *a)
	}
	rules, err := householdstore.LoadRules(ctx, r.Client)
	if err != nil {
		return err
	}
	live := make([]*flexv1.Asset, len(assets.Items))
	for i := range assets.Items {
		live[i] = &assets.Items[i]
	}
	before := site.Status.EligiblePropositions
	// The status says what it was computed from, so that its readers (the REST API, the
	// Enrolment controller and webhook) can tell whether it is current (household.CurrentEligibility).
	site.Status.EvaluatedFrom = household.EligibilityInputsOf(live, rules)
	r.setEligibility(site, household.EvaluateAssets(&site.Spec, live, rules))
	if !slices.Equal(before, site.Status.EligiblePropositions) && site.Status.ObservedGeneration > 0 {
		r.Recorder.Eventf(site, nil, corev1.EventTypeNormal, "EligibilityChanged", "Evaluate",
			"Eligible propositions: %s", joinPropositions(site.Status.EligiblePropositions))
		// Counted with the event: a reconcile repeated after a failed status write counts
		// (and tells) the change again, as it does the event.
		metrics.EligibilityChanges.Inc()
	}
	return nil
}

// assetsInTransit are the assets the site's last evaluation held that found (the cache's)
// lacks while the API server has them, live and still the site's: read by name, one GET for
// each asset missing, which only a deletion or a hand-over between shards makes. Their arrival
// in the cache brings the site back (the Asset watch), and it is evaluated again from there.
func (r *SiteReconciler) assetsInTransit(ctx context.Context, site *flexv1.Site, found []*flexv1.Asset) ([]*flexv1.Asset, error) {
	var transit []*flexv1.Asset
	for _, was := range site.Status.Assets {
		if was.Name == "" || slices.ContainsFunc(found, func(a *flexv1.Asset) bool { return a.Name == was.Name }) ||
			slices.ContainsFunc(transit, func(a *flexv1.Asset) bool { return a.Name == was.Name }) {
			continue
		}
		asset := &flexv1.Asset{}
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: was.Name}, asset)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if asset.DeletionTimestamp.IsZero() && asset.Spec.SiteName == site.Name {
			transit = append(transit, asset)
		}
	}
	return transit, nil
}

// setEligibility writes an eligibility result and the Eligible condition into the status.
func (r *SiteReconciler) setEligibility(site *flexv1.Site, result eligibility.Result) {
	st := &site.Status
	st.Properties = result.Properties
	st.EligiblePropositions = result.EligiblePropositions
	st.Assets = result.Assets
	eligible := metav1.Condition{Type: flexv1.EligibleCondition, ObservedGeneration: site.Generation}
	switch {
	case len(result.EligiblePropositions) > 0:
		eligible.Status, eligible.Reason = metav1.ConditionTrue, flexv1.ReasonEligible
		eligible.Message = "Eligible for " + joinPropositions(result.EligiblePropositions)
	case len(result.Assets) == 0:
		eligible.Status, eligible.Reason = metav1.ConditionFalse, flexv1.ReasonNoAssets
		eligible.Message = "The site has no assets"
	default:
		eligible.Status, eligible.Reason = metav1.ConditionFalse, flexv1.ReasonNotEligible
		eligible.Message = "No asset qualifies for any proposition; see status.assets for the issues"
	}
	meta.SetStatusCondition(&st.Conditions, eligible)
}

func joinPropositions(ps []flexv1.PropositionName) string {
	if len(ps) == 0 {
		return "none"
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// finalize deletes the site's children (householdstore.DeleteChildren) and releases the site once
// none remain (their deletion events requeue it).
func (r *SiteReconciler) finalize(ctx context.Context, site *flexv1.Site) error {
	remaining, err := householdstore.DeleteChildren(ctx, r.Client, r.APIReader, site)
	if err != nil || len(remaining) > 0 {
		return err
	}
	if err := r.Notifier.final(ctx, site, events.SiteOffboarded(site), r.Now()); err != nil {
		return err
	}
	// The bank details go with the site (as their Secret did with its owner reference).
	if err := r.BankDetails.ForgetSite(ctx, site.Namespace, site.Labels[flexv1.IDLabel]); err != nil {
		return err
	}
	return metadata.RemoveFinalizer(ctx, r.Client, site)
}

// SetupWithManager watches Sites and everything their eligibility depends on.
func (r *SiteReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.BankDetails == nil {
		return errNoDatabase
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.Site{}, builder.WithPredicates(r.Shard.For(predicate.Or(
			// Spec changes and deletion bump the generation; the id is a label. Status-only
			// updates (our own, a withdrawal recorded) do not trigger.
			predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})))).
		// A child's events reach its site's shard; one not yet adopted, every shard (the
		// site's adopts it, the others drop it).
		Watches(&flexv1.Asset{}, handler.EnqueueRequestsFromMapFunc(siteOfChild),
			builder.WithPredicates(r.Shard.MineOrUnassigned(),
				predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// Enrolments: their creation may complete an in-flight site; their deletion may be what
		// a deleted site waits for.
		Watches(&flexv1.Enrolment{}, handler.EnqueueRequestsFromMapFunc(siteOfChild),
			builder.WithPredicates(r.Shard.MineOrUnassigned(), createdOrDeleted)).
		// Ledgers: the cache holds them without their transactions (index.CacheOptions).
		Watches(&flexv1.RewardLedger{}, handler.EnqueueRequestsFromMapFunc(siteOfChild),
			builder.WithPredicates(r.Shard.MineOrUnassigned(), deletedOnly)).
		// Claims: a new one may need releasing later; a deleted one may be what a deleted site waits for.
		// A deleted one may free its MPAN for another site declared with it.
		Watches(&flexv1.MPANClaim{}, handler.EnqueueRequestsFromMapFunc(r.claimsChanged), builder.WithPredicates(createdOrDeleted)).
		// A site gone frees its MPAN (held by its name) for another site declared with it.
		Watches(&flexv1.Site{}, handler.EnqueueRequestsFromMapFunc(r.othersOfMPAN), builder.WithPredicates(deletedOnly)).
		// A catalogue change re-evaluates many sites: queued behind the sites someone just
		// changed (low priority), and thinned out while REST requests are in flight.
		Watches(&flexv1.Proposition{}, r.fanOut(r.allSites),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&flexv1.AssetModel{}, r.fanOut(r.sitesUsingModel),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(r.awaited()).
		Named("site").
		WithOptions(opts).
		Complete(r.Shard.Sharded("site", &flexv1.Site{}, mgr.GetClient(), r))
}

// awaited enqueues, ahead of a catalogue change's fan-out and outside its thinning, the sites
// a reader waits on (priority.Gate.Awaited: the REST API's GET eligibility, when a site's
// status is behind what its cache holds).
func (r *SiteReconciler) awaited() source.Source {
	return source.Func(func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
		if r.Background == nil {
			return nil
		}
		asks := r.Background.AwaitedWork()
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-asks:
					r.fanout.Delete(key)
					q.Add(reconcile.Request{NamespacedName: key})
				}
			}
		}()
		return nil
	})
}

// fanOut enqueues the sites a catalogue object maps to at low priority (below every event
// of a site's own objects) and marks them as background work for Reconcile.
func (r *SiteReconciler) fanOut(sites handler.MapFunc) handler.EventHandler {
	enqueue := func(ctx context.Context, objs []client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		seen := map[reconcile.Request]bool{}
		for _, obj := range objs {
			for _, req := range sites(ctx, obj) {
				if seen[req] {
					continue
				}
				seen[req] = true
				r.fanout.Store(req.NamespacedName, true)
				if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
					pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
				} else {
					q.Add(req)
				}
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, []client.Object{e.Object}, q)
		},
		// Both objects: a renamed asset model maps to the sites of its old and new name.
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, []client.Object{e.ObjectOld, e.ObjectNew}, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, []client.Object{e.Object}, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			enqueue(ctx, []client.Object{e.Object}, q)
		},
	}
}

// deletedOnly passes only delete events: a Site cares about its enrolments and ledger only
// while it waits for them to go.
var deletedOnly = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return true },
}

// createdOrDeleted passes creations and deletions.
var createdOrDeleted = predicate.Funcs{
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// siteOfChild maps an Asset, Enrolment, RewardLedger or MPANClaim to its Site.
func siteOfChild(_ context.Context, obj client.Object) []reconcile.Request {
	siteName := household.SiteNameOf(obj)
	if siteName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: siteName}}}
}

// claimsChanged maps an MPANClaim to its Site and to the other Sites declared with its MPAN
// (one refused it may take it now).
func (r *SiteReconciler) claimsChanged(ctx context.Context, obj client.Object) []reconcile.Request {
	reqs := siteOfChild(ctx, obj)
	if claim, ok := obj.(*flexv1.MPANClaim); ok {
		reqs = append(reqs, r.sitesOfMPAN(ctx, claim.Namespace, claim.Spec.MPAN, claim.Spec.SiteName)...)
	}
	return reqs
}

// othersOfMPAN maps a deleted Site to the other Sites declared with its MPAN.
func (r *SiteReconciler) othersOfMPAN(ctx context.Context, obj client.Object) []reconcile.Request {
	site, ok := obj.(*flexv1.Site)
	if !ok {
		return nil
	}
	return r.sitesOfMPAN(ctx, site.Namespace, site.Spec.MPAN, site.Name)
}

// sitesOfMPAN finds, from the cache's index, the Sites with mpan other than except.
func (r *SiteReconciler) sitesOfMPAN(ctx context.Context, ns, mpan, except string) []reconcile.Request {
	if mpan == "" {
		return nil
	}
	sites, err := index.NewLookup(r.Client).SitesByMPAN(ctx, ns, mpan)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "finding the sites of an MPAN")
		return nil
	}
	var reqs []reconcile.Request
	for _, s := range sites {
		if s.Name != except {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(s)})
		}
	}
	return reqs
}

// allSites maps a Proposition change to every Site: a proposition's rules apply to all.
func (r *SiteReconciler) allSites(ctx context.Context, _ client.Object) []reconcile.Request {
	sites := &flexv1.SiteList{}
	// With shards, each fans out to its own sites: that is how a catalogue change spreads.
	if err := r.List(ctx, sites, append(r.Shard.Selector(), client.UnsafeDisableDeepCopy)...); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing sites for a proposition change")
		return nil
	}
	reqs := make([]reconcile.Request, len(sites.Items))
	for i := range sites.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&sites.Items[i])}
	}
	return reqs
}

// sitesUsingModel maps an AssetModel change to the Sites with an asset of that model (both
// the old and the new model name reach here on a rename: the handler maps both objects).
func (r *SiteReconciler) sitesUsingModel(ctx context.Context, obj client.Object) []reconcile.Request {
	model, ok := obj.(*flexv1.AssetModel)
	if !ok {
		return nil
	}
	assets, err := index.NewLookup(r.Client).AssetsOfModel(ctx, model.Spec.ModelName)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing assets for an asset model change")
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for _, a := range assets {
		if !r.Shard.Mine(a) {
			continue // another shard's household (an asset is on its site's shard)
		}
		key := types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.SiteName}
		if !seen[key] {
			seen[key] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}
