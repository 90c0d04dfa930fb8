package controllers

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers/metadata"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/shards"
	"github.com/flexsite/flexsite/internal/statuswrites"
)

// EnrolmentReconciler reports whether an Enrolment is active, not eligible (and why) or
// withdrawn, from the household's enrolment decision. Deleting an Enrolment that was active
// records the household's withdrawal in its Site's status, so a later enrolment without
// overrideWithdrawal is refused whichever door it comes through.
type EnrolmentReconciler struct {
	// Shard, when set, is the replica's part of the ring: only its objects are reconciled here.
	Shard *shards.Replica
	client.Client
	// APIReader reads a site fresh before its withdrawal history is appended to.
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Notifier writes the enrolment's events to the outbox.
	Notifier notifier
	// written: this reconciler's status writes the cache has yet to show.
	written statuswrites.Writes
}

// +kubebuilder:rbac:groups=flexsite.io,resources=enrolments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=enrolments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=enrolments/finalizers,verbs=update
// +kubebuilder:rbac:groups=flexsite.io,resources=enrolmentclaims,verbs=get;delete
// +kubebuilder:rbac:groups=flexsite.io,resources=sites,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=sites/status,verbs=get;update;patch

// Reconcile fetches the Enrolment and its Site, ensures the finalizer, asks the household
// whether the enrolment may be active and writes the answer as status in one patch.
func (r *EnrolmentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	enr := &flexv1.Enrolment{}
	if done, res, err := r.written.Fetch(ctx, r.Client, req.NamespacedName, enr); done {
		return res, err
	}
	sum := summary{client: r.Client, recorder: r.Recorder, written: &r.written}
	site, err := r.siteOf(ctx, enr)
	if err == nil && !enr.DeletionTimestamp.IsZero() {
		err = r.finalize(ctx, enr, site)
	}
	if err != nil || !enr.DeletionTimestamp.IsZero() {
		return sum.patch(ctx, enr.DeepCopy(), enr, "", err)
	}
	err = metadata.Ensure(ctx, r.Client, enr, true, false)
	base := enr.DeepCopy()
	if err == nil {
		err = r.reconcile(ctx, enr, site)
	}
	if writesStatus(base, err) {
		// The phase change's event is written before the status patch that writes the phase;
		// when it cannot be, neither is the phase, and both are tried again.
		if rerr := r.Notifier.report(ctx, enr, "enrolment", events.EnrolmentEvents(base, enr, siteIDFrom(site)), r.Now()); rerr != nil {
			return ctrl.Result{}, rerr
		}
	}
	return sum.patch(ctx, base, enr, fmt.Sprintf("Site %q is enrolled in %s", enr.Spec.SiteName, enr.Spec.Proposition), err)
}

// siteIDFrom is a site's API id; "" for no site.
func siteIDFrom(site *flexv1.Site) string {
	if site == nil {
		return ""
	}
	return site.Labels[flexv1.IDLabel]
}

// siteOf reads the enrolment's Site; nil when it does not exist.
func (r *EnrolmentReconciler) siteOf(ctx context.Context, enr *flexv1.Enrolment) (*flexv1.Site, error) {
	site := &flexv1.Site{}
	err := r.Get(ctx, types.NamespacedName{Namespace: enr.Namespace, Name: enr.Spec.SiteName}, site)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return site, err
}

// reconcile translates the household's enrolment decision into the enrolment's phase:
// allowed is Active; a pending site waits; anything else refused stalls until something
// changes (the site's assets or consent, the catalogue, an override).
func (r *EnrolmentReconciler) reconcile(ctx context.Context, enr *flexv1.Enrolment, site *flexv1.Site) error {
	rules, err := householdstore.LoadRules(ctx, r.Client)
	if err != nil {
		return err
	}
	req := household.EnrolmentRequest{Site: site, Proposition: enr.Spec.Proposition,
		Override: enr.Spec.OverrideWithdrawal, Enrolment: enr, Rules: rules}
	if site != nil {
		assets, err := r.assetsOf(ctx, site)
		if err != nil {
			return err
		}
		// The site's verdict counts once it covers the site's spec, the assets and the
		// catalogue this cache holds: a status evaluated before an asset declared with the
		// enrolment arrived would say "no assets". Until then a new enrolment stays Pending;
		// one already decided keeps to the site's last evaluation (a changed email should not
		// flap it to Pending), and the new evaluation brings it back here.
		if res := household.CurrentEligibility(site, assets, rules); res != nil {
			req.Eligibility = res
		} else if decided(enr) {
			req.Eligibility, _ = household.EvaluatedEligibility(site)
		}
	}
	d := household.DecideEnrolment(req)
	// The phase and its reasons (issues, the Ready condition) go out in the one status patch
	// summary.patch writes: nobody reads a phase without the reasons that go with it.
	st := &enr.Status
	if d.Verdict == household.NotEligible && len(req.Eligibility.Assets) == 0 {
		// "No assets" is the one verdict a cache behind the API server gives wrongly when a
		// site, its asset and the enrolment are declared together: the asset not cached yet.
		// It is told only once the API server confirms it (rarely asked: a site with none).
		if stored, err := r.storesAssets(ctx, site); err != nil || stored {
			if err == nil {
				st.Phase, st.Issues = flexv1.EnrolmentPending, nil
				err = waitingBriefly(time.Second, flexv1.ReasonEligibilityPending, "Waiting for the site's eligibility to be computed")
			}
			return err
		}
	}
	st.Issues = d.Issues
	switch d.Verdict {
	case household.Allowed, household.AlreadyEnrolled:
		st.Phase = flexv1.EnrolmentActive
		if st.EnrolledAt == nil {
			now := metav1.NewTime(r.Now().UTC().Truncate(time.Second))
			st.EnrolledAt = &now
			r.Recorder.Eventf(enr, nil, corev1.EventTypeNormal, flexv1.ReasonEnrolled, "Enrol",
				"Site %q is enrolled in %s", enr.Spec.SiteName, enr.Spec.Proposition)
		}
		return nil
	case household.SitePending:
		st.Phase = flexv1.EnrolmentPending
		if d.Reason == flexv1.ReasonEligibilityPending {
			return waitingBriefly(0, d.Reason, d.Message)
		}
		return waiting(0, d.Reason, d.Message)
	case household.PreviouslyWithdrew:
		st.Phase = flexv1.EnrolmentWithdrawn
		return stalled(d.Reason, d.Message+"; set spec.overrideWithdrawal to re-enrol")
	default:
		st.Phase = flexv1.EnrolmentNotEligible
	}
	return stalled(d.Reason, d.Message)
}

// decided reports whether the enrolment has a verdict published already (not Pending).
func decided(enr *flexv1.Enrolment) bool {
	return enr.Status.Phase != "" && enr.Status.Phase != flexv1.EnrolmentPending
}

// assetsOf are the site's Assets in the cache, read-only.
func (r *EnrolmentReconciler) assetsOf(ctx context.Context, site *flexv1.Site) ([]*flexv1.Asset, error) {
	return index.NewLookup(r.Client).AssetsOfSite(ctx, site.Namespace, site.Name)
}

// storesAssets reports whether the API server holds a live Asset of the site.
func (r *EnrolmentReconciler) storesAssets(ctx context.Context, site *flexv1.Site) (bool, error) {
	assets, err := index.NewAPIServerLookup(r.APIReader).AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return false, err
	}
	return slices.ContainsFunc(assets, func(a *flexv1.Asset) bool { return a.DeletionTimestamp.IsZero() }), nil
}

// finalize records the household's withdrawal when the deletion is one
// (household.DeletionIsWithdrawal), deletes the Enrolment's claim and releases the Enrolment.
func (r *EnrolmentReconciler) finalize(ctx context.Context, enr *flexv1.Enrolment, site *flexv1.Site) error {
	if !controllerutil.ContainsFinalizer(enr, flexv1.Finalizer) {
		return nil
	}
	if household.DeletionIsWithdrawal(enr, site) {
		w := household.WithdrawalFrom(enr, r.Now())
		recorded, err := householdstore.RecordWithdrawal(ctx, r.Client, r.APIReader, client.ObjectKeyFromObject(site), w)
		if err != nil {
			return err
		}
		// Told once: a finalize repeated after a conflict records nothing new.
		if recorded {
			r.Recorder.Eventf(site, enr, corev1.EventTypeNormal, "Withdrew", "Unenrol",
				"The household withdrew from %s", enr.Spec.Proposition)
			// A REST unenrol recorded its withdrawal already (and counted it): this counts only
			// the Enrolments deleted through the Kubernetes API (kubectl, GitOps).
			metrics.Withdrawals.WithLabelValues(metrics.DoorEnrolmentDeleted).Inc()
		}
	}
	// Its removal is told with the site's id (with no site left, there is nobody to tell).
	if site != nil {
		if err := r.Notifier.final(ctx, enr, events.EnrolmentRemovedChange(enr, siteIDFrom(site)), r.Now()); err != nil {
			return err
		}
	}
	// Its claim goes before it does, so that a new enrolment of the site in the proposition
	// can follow it (household's "Which Enrolment holds a site's enrolment").
	if err := householdstore.ReleaseEnrolmentClaim(ctx, r.Client, r.APIReader, enr); err != nil {
		return err
	}
	return metadata.RemoveFinalizer(ctx, r.Client, enr)
}

// SetupWithManager watches Enrolments, their Sites (spec, status and withdrawals all matter)
// and Propositions.
func (r *EnrolmentReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.Enrolment{}, builder.WithPredicates(r.Shard.For(predicate.GenerationChangedPredicate{}))).
		// A site's enrolments are on its shard.
		Watches(&flexv1.Site{}, handler.EnqueueRequestsFromMapFunc(r.enrolmentsOfSite),
			builder.WithPredicates(predicate.NewPredicateFuncs(r.Shard.Mine))).
		Watches(&flexv1.Proposition{}, handler.EnqueueRequestsFromMapFunc(r.enrolmentsOfProposition),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("enrolment").
		WithOptions(opts).
		Complete(r.Shard.Sharded("enrolment", &flexv1.Enrolment{}, mgr.GetClient(), r))
}

func (r *EnrolmentReconciler) enrolmentsOfSite(ctx context.Context, site client.Object) []reconcile.Request {
	return childrenOf(ctx, index.NewLookup(r.Client).EnrolmentsOfSite, site)
}

func (r *EnrolmentReconciler) enrolmentsOfProposition(ctx context.Context, obj client.Object) []reconcile.Request {
	prop, ok := obj.(*flexv1.Proposition)
	if !ok {
		return nil
	}
	list := &flexv1.EnrolmentList{}
	if err := r.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "listing enrolments for a proposition change")
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].Spec.Proposition == prop.Spec.Proposition {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}
