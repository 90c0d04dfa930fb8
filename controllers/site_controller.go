package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/index"
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
}

// +kubebuilder:rbac:groups=flexsite.io,resources=sites,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=sites/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=sites/finalizers,verbs=update
// +kubebuilder:rbac:groups=flexsite.io,resources=assets;enrolments;rewardledgers,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=propositions;assetmodels,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile fetches the Site, ensures its finalizer and id, computes its eligibility and
// writes the status in one patch (only when it changed, so a resync writes nothing).
func (r *SiteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	site := &flexv1.Site{}
	if err := r.Get(ctx, req.NamespacedName, site); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !site.DeletionTimestamp.IsZero() {
		return resultFor(r.finalize(ctx, site))
	}
	if err := ensureMetadata(ctx, r.Client, site, true, true); err != nil {
		return resultFor(err)
	}
	state, wait, err := r.inFlight(ctx, site, r.Now())
	switch {
	case err != nil:
		return resultFor(err)
	case state == inProgress:
		// Publish nothing about a half-written site; look again at the deadline (or sooner,
		// when the objects it waits for arrive).
		return ctrl.Result{RequeueAfter: wait}, nil
	case state == abandoned:
		r.Recorder.Eventf(site, nil, corev1.EventTypeWarning, "AbandonedOnboard", "Delete",
			"The request that created this site did not finish writing it; deleting the half-written site")
		return resultFor(client.IgnoreNotFound(r.Delete(ctx, site)))
	}
	result, err := r.evaluate(ctx, site)
	if err != nil {
		return resultFor(err)
	}
	return resultFor(r.patchStatus(ctx, site, result, state))
}

// evaluate runs the eligibility rules on the site as it is stored now.
func (r *SiteReconciler) evaluate(ctx context.Context, site *flexv1.Site) (eligibility.Result, error) {
	assets := &flexv1.AssetList{}
	if err := r.List(ctx, assets, client.InNamespace(site.Namespace),
		client.MatchingFields{index.SiteName: site.Name}); err != nil {
		return eligibility.Result{}, err
	}
	rules, err := LoadRules(ctx, r.Client)
	if err != nil {
		return eligibility.Result{}, err
	}
	inputs := make([]eligibility.Asset, 0, len(assets.Items))
	for i := range assets.Items {
		a := &assets.Items[i]
		if a.DeletionTimestamp.IsZero() {
			inputs = append(inputs, eligibility.Asset{Name: a.Name, ID: a.Labels[flexv1.IDLabel], Spec: a.Spec})
		}
	}
	return eligibility.Evaluate(&site.Spec, inputs, rules), nil
}

// LoadRules reads the eligibility rules in force (Propositions and the AssetModel catalogue)
// from the cache. The REST facade calls it too, so both evaluate with the same rules.
func LoadRules(ctx context.Context, c client.Reader) (eligibility.Rules, error) {
	props := &flexv1.PropositionList{}
	// The rules are only read, never changed: skip the cache's defensive deep copy, which
	// matters when a catalogue change re-evaluates thousands of sites.
	if err := c.List(ctx, props, client.UnsafeDisableDeepCopy); err != nil {
		return eligibility.Rules{}, err
	}
	models := &flexv1.AssetModelList{}
	if err := c.List(ctx, models, client.UnsafeDisableDeepCopy); err != nil {
		return eligibility.Rules{}, err
	}
	return eligibility.NewRules(props.Items, models.Items), nil
}

// patchStatus writes the eligibility result and conditions, when anything changed.
func (r *SiteReconciler) patchStatus(ctx context.Context, site *flexv1.Site, result eligibility.Result, state inFlightState) error {
	base := site.DeepCopy()
	st := &site.Status
	st.ObservedGeneration = site.Generation
	st.Properties = result.Properties
	st.EligiblePropositions = result.EligiblePropositions
	st.Assets = result.Assets
	st.Withdrawals = withdrawalsOf(site)

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
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: flexv1.ReadyCondition, Status: metav1.ConditionTrue, ObservedGeneration: site.Generation,
		Reason: flexv1.ReasonEligibilityComputed, Message: "Eligibility is up to date",
	})
	switch state {
	case provisioned:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: flexv1.ProvisionedCondition, Status: metav1.ConditionTrue, ObservedGeneration: site.Generation,
			Reason: flexv1.ReasonRequestCompleted, Message: "Everything the creating request wrote exists",
		})
	case expired:
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: flexv1.ProvisionedCondition, Status: metav1.ConditionTrue, ObservedGeneration: site.Generation,
			Reason: flexv1.ReasonMarkerExpired, Message: "The in-flight marker is too old to act on",
		})
	}

	if equality.Semantic.DeepEqual(base.Status, site.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, site, client.MergeFrom(base)); err != nil {
		return err
	}
	if !slices.Equal(base.Status.EligiblePropositions, st.EligiblePropositions) {
		r.Recorder.Eventf(site, nil, corev1.EventTypeNormal, "EligibilityChanged", "Evaluate",
			"Eligible propositions: %s", joinPropositions(st.EligiblePropositions))
	}
	return nil
}

// withdrawalsOf mirrors the site's withdrawal annotations into status, ordered by proposition.
func withdrawalsOf(site *flexv1.Site) []flexv1.Withdrawal {
	var out []flexv1.Withdrawal
	for key, value := range site.Annotations {
		p, ok := strings.CutPrefix(key, flexv1.WithdrawalAnnotationPrefix)
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339, value)
		if err != nil {
			continue // a hand-edited, unreadable record: still a withdrawal, just without a time
		}
		out = append(out, flexv1.Withdrawal{Proposition: flexv1.PropositionName(p), At: metav1.NewTime(at)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Proposition < out[j].Proposition })
	return out
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

// finalize deletes the site's Enrolments, Assets and RewardLedger, then releases the site.
// Enrolments go first: their own finalizer sees the site is going and records no withdrawal.
// Children are listed from the API server, not the cache, so none created a moment ago is
// left behind; the site is released only when none remain (their deletion events requeue it).
func (r *SiteReconciler) finalize(ctx context.Context, site *flexv1.Site) error {
	remaining := 0
	for _, list := range []client.ObjectList{&flexv1.EnrolmentList{}, &flexv1.AssetList{}, &flexv1.RewardLedgerList{}} {
		if err := r.APIReader.List(ctx, list, client.InNamespace(site.Namespace),
			client.MatchingFields{index.SiteName: site.Name}); err != nil {
			return err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		for _, item := range items {
			child := item.(client.Object)
			remaining++
			if !child.GetDeletionTimestamp().IsZero() {
				continue
			}
			if err := r.Delete(ctx, child); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting %T %s of site %s: %w", child, child.GetName(), site.Name, err)
			}
		}
	}
	if remaining > 0 {
		return nil
	}
	return removeFinalizer(ctx, r.Client, site)
}

// SetupWithManager watches Sites and everything their eligibility depends on.
func (r *SiteReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.Site{}, builder.WithPredicates(predicate.Or(
			// Spec changes and deletion bump the generation; withdrawals are annotations;
			// the id is a label. Status-only updates (our own) do not trigger.
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Watches(&flexv1.Asset{}, handler.EnqueueRequestsFromMapFunc(siteOfChild),
			builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		// Enrolments: their creation may complete an in-flight site; their deletion may be what
		// a deleted site waits for.
		Watches(&flexv1.Enrolment{}, handler.EnqueueRequestsFromMapFunc(siteOfChild), builder.WithPredicates(createdOrDeleted)).
		Watches(&flexv1.RewardLedger{}, handler.EnqueueRequestsFromMapFunc(siteOfChild), builder.WithPredicates(deletedOnly)).
		Watches(&flexv1.Proposition{}, handler.EnqueueRequestsFromMapFunc(r.allSites),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&flexv1.AssetModel{}, handler.EnqueueRequestsFromMapFunc(r.sitesUsingModel),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("site").
		WithOptions(opts).
		Complete(r)
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

// siteOfChild maps an Asset, Enrolment or RewardLedger to its Site.
func siteOfChild(_ context.Context, obj client.Object) []reconcile.Request {
	var siteName string
	switch o := obj.(type) {
	case *flexv1.Asset:
		siteName = o.Spec.SiteName
	case *flexv1.Enrolment:
		siteName = o.Spec.SiteName
	case *flexv1.RewardLedger:
		siteName = o.Spec.SiteName
	}
	if siteName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: siteName}}}
}

// allSites maps a Proposition change to every Site: a proposition's rules apply to all.
func (r *SiteReconciler) allSites(ctx context.Context, _ client.Object) []reconcile.Request {
	sites := &flexv1.SiteList{}
	if err := r.List(ctx, sites, client.UnsafeDisableDeepCopy); err != nil {
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
	assets := &flexv1.AssetList{}
	if err := r.List(ctx, assets, client.MatchingFields{index.AssetModel: model.Spec.ModelName},
		client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing assets for an asset model change")
		return nil
	}
	seen := map[types.NamespacedName]bool{}
	var reqs []reconcile.Request
	for i := range assets.Items {
		key := types.NamespacedName{Namespace: assets.Items[i].Namespace, Name: assets.Items[i].Spec.SiteName}
		if !seen[key] {
			seen[key] = true
			reqs = append(reqs, reconcile.Request{NamespacedName: key})
		}
	}
	return reqs
}
