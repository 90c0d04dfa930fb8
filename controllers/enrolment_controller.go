package controllers

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// EnrolmentReconciler reports whether an Enrolment is active, not eligible (and why) or
// withdrawn, from its Site's status and the Proposition's rules. Deleting an Enrolment that
// was ever active records a withdrawal on the Site, so a later enrolment without
// overrideWithdrawal is refused whichever door it comes through.
type EnrolmentReconciler struct {
	client.Client
	Recorder recorder.EventRecorder
	// Now is the clock (tests may replace it).
	Now func() time.Time
}

// +kubebuilder:rbac:groups=flexsite.io,resources=enrolments,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=enrolments/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=flexsite.io,resources=enrolments/finalizers,verbs=update
// +kubebuilder:rbac:groups=flexsite.io,resources=sites,verbs=get;list;watch;patch

// Reconcile fetches the Enrolment and its Site, ensures the finalizer, works out the phase
// and writes the status in one patch.
func (r *EnrolmentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	enr := &flexv1.Enrolment{}
	if err := r.Get(ctx, req.NamespacedName, enr); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	site := &flexv1.Site{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: enr.Namespace, Name: enr.Spec.SiteName}, site); err != nil {
		if !apierrors.IsNotFound(err) {
			return resultFor(err)
		}
		site = nil
	}
	if !enr.DeletionTimestamp.IsZero() {
		return resultFor(r.finalize(ctx, enr, site))
	}
	if err := ensureMetadata(ctx, r.Client, enr, true, false); err != nil {
		return resultFor(err)
	}
	var prop *flexv1.Proposition
	candidate := &flexv1.Proposition{}
	err := r.Get(ctx, types.NamespacedName{Name: identity.PropositionObjectName(enr.Spec.Proposition)}, candidate)
	switch {
	case err == nil:
		prop = candidate
	case !apierrors.IsNotFound(err):
		return resultFor(err)
	}
	return resultFor(r.patchStatus(ctx, enr, assess(enr, site, prop)))
}

const reasonEligibilityPending = "EligibilityPending"

// assessment is the outcome of weighing an enrolment against its site and proposition.
type assessment struct {
	phase   flexv1.EnrolmentPhase
	reason  string
	message string
	issues  []flexv1.EligibilityIssue
}

// assess decides an enrolment's phase. It is pure so the order of the rules is easy to read
// and to test: a missing or departing site, a withdrawal, a proposition that is not offered
// or needs consent, stale eligibility, and finally the site's eligibility itself.
func assess(enr *flexv1.Enrolment, site *flexv1.Site, prop *flexv1.Proposition) assessment {
	p := enr.Spec.Proposition
	switch {
	case site == nil:
		return assessment{phase: flexv1.EnrolmentPending, reason: flexv1.ReasonSiteNotFound,
			message: fmt.Sprintf("Site %q does not exist", enr.Spec.SiteName)}
	case !site.DeletionTimestamp.IsZero():
		return assessment{phase: flexv1.EnrolmentPending, reason: flexv1.ReasonSiteDeleting,
			message: fmt.Sprintf("Site %q is being deleted", site.Name)}
	case hasWithdrawn(site, p) && !enr.Spec.OverrideWithdrawal:
		return assessment{phase: flexv1.EnrolmentWithdrawn, reason: flexv1.ReasonWithdrawn,
			message: fmt.Sprintf("The household withdrew from %s; set spec.overrideWithdrawal to re-enrol", p)}
	case prop == nil:
		return assessment{phase: flexv1.EnrolmentNotEligible, reason: "PropositionNotOffered",
			message: fmt.Sprintf("Proposition %s is not offered (no Proposition %q)", p, identity.PropositionObjectName(p))}
	case prop.Spec.RequiresBoundaryMeterConsent && site.Spec.BoundaryMeterConsentAt == nil:
		return assessment{phase: flexv1.EnrolmentNotEligible, reason: "BoundaryMeterConsentRequired",
			message: fmt.Sprintf("Proposition %s needs the household's boundary meter consent", p)}
	case !siteStatusCurrent(site):
		return assessment{phase: flexv1.EnrolmentPending, reason: reasonEligibilityPending,
			message: "Waiting for the site's eligibility to be computed"}
	case containsProposition(site.Status.EligiblePropositions, p):
		return assessment{phase: flexv1.EnrolmentActive, reason: flexv1.ReasonEnrolled,
			message: fmt.Sprintf("Site %q is enrolled in %s", site.Name, p)}
	default:
		issues := siteIssues(site, p)
		msg := fmt.Sprintf("Site %q is not eligible for %s", site.Name, p)
		if len(issues) > 0 {
			msg += ": " + joinIssues(issues)
		} else if len(site.Status.Assets) == 0 {
			msg += ": the site has no assets"
		}
		return assessment{phase: flexv1.EnrolmentNotEligible, reason: flexv1.ReasonNotEligible, message: msg, issues: issues}
	}
}

func (r *EnrolmentReconciler) patchStatus(ctx context.Context, enr *flexv1.Enrolment, a assessment) error {
	if a.reason == reasonEligibilityPending && enr.Status.Phase == "" {
		// A new enrolment of a site whose eligibility is being computed: writing "Pending"
		// now would only be overwritten a moment later, when the site's status arrives
		// (which requeues this enrolment). Skip the write.
		return nil
	}
	base := enr.DeepCopy()
	st := &enr.Status
	st.ObservedGeneration = enr.Generation
	st.Phase = a.phase
	st.Issues = a.issues
	if a.phase == flexv1.EnrolmentActive && st.EnrolledAt == nil {
		now := metav1.NewTime(r.Now().Truncate(time.Second))
		st.EnrolledAt = &now
	}
	ready := metav1.Condition{Type: flexv1.ReadyCondition, Status: metav1.ConditionFalse,
		ObservedGeneration: enr.Generation, Reason: a.reason, Message: a.message}
	if a.phase == flexv1.EnrolmentActive {
		ready.Status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	if equality.Semantic.DeepEqual(base.Status, enr.Status) {
		return nil
	}
	if err := r.Status().Patch(ctx, enr, client.MergeFrom(base)); err != nil {
		return err
	}
	if base.Status.Phase != st.Phase {
		eventType := corev1.EventTypeNormal
		if a.phase == flexv1.EnrolmentNotEligible || a.phase == flexv1.EnrolmentWithdrawn {
			eventType = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(enr, nil, eventType, a.reason, "Assess", "%s", a.message)
	}
	return nil
}

// finalize records the withdrawal on the Site (when the enrolment was ever active, the site
// stays, and the deletion is not a failed request undoing itself) and releases the
// Enrolment. The record is a merge patch of one annotation, so it never conflicts with other
// writers of the Site.
func (r *EnrolmentReconciler) finalize(ctx context.Context, enr *flexv1.Enrolment, site *flexv1.Site) error {
	_, undone := enr.Annotations[flexv1.NoWithdrawalAnnotation]
	if enr.Status.EnrolledAt != nil && site != nil && site.DeletionTimestamp.IsZero() && !undone &&
		!hasWithdrawn(site, enr.Spec.Proposition) {
		if err := RecordWithdrawal(ctx, r.Client, site, enr.Spec.Proposition, r.Now()); err != nil {
			return err
		}
		r.Recorder.Eventf(site, enr, corev1.EventTypeNormal, "Withdrew", "Unenrol",
			"The household withdrew from %s", enr.Spec.Proposition)
	}
	return removeFinalizer(ctx, r.Client, enr)
}

// RecordWithdrawal notes on the Site that the household withdrew from p. The REST facade's
// unenrol calls it too, so both doors keep the same record.
func RecordWithdrawal(ctx context.Context, c client.Client, site *flexv1.Site, p flexv1.PropositionName, at time.Time) error {
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`,
		identity.WithdrawalAnnotation(p), at.UTC().Format(time.RFC3339))
	return c.Patch(ctx, site, client.RawPatch(types.MergePatchType, []byte(patch)))
}

func hasWithdrawn(site *flexv1.Site, p flexv1.PropositionName) bool {
	_, ok := site.Annotations[identity.WithdrawalAnnotation(p)]
	return ok
}

// siteStatusCurrent reports whether the site's eligibility was computed from its current spec.
func siteStatusCurrent(site *flexv1.Site) bool {
	ready := meta.FindStatusCondition(site.Status.Conditions, flexv1.ReadyCondition)
	return ready != nil && ready.ObservedGeneration == site.Generation && site.Status.ObservedGeneration == site.Generation
}

func containsProposition(ps []flexv1.PropositionName, p flexv1.PropositionName) bool {
	for _, x := range ps {
		if x == p {
			return true
		}
	}
	return false
}

// siteIssues collects the distinct issue codes of the site's assets for p.
func siteIssues(site *flexv1.Site, p flexv1.PropositionName) []flexv1.EligibilityIssue {
	var out []flexv1.EligibilityIssue
	seen := map[flexv1.EligibilityIssue]bool{}
	for _, a := range site.Status.Assets {
		for _, pe := range a.Propositions {
			if pe.Proposition != p {
				continue
			}
			for _, issue := range pe.Issues {
				if !seen[issue] {
					seen[issue] = true
					out = append(out, issue)
				}
			}
		}
	}
	return out
}

func joinIssues(issues []flexv1.EligibilityIssue) string {
	s := make([]string, len(issues))
	for i, issue := range issues {
		s[i] = string(issue)
	}
	return strings.Join(s, ", ")
}

// SetupWithManager watches Enrolments, their Sites (spec, status and withdrawals all matter)
// and Propositions.
func (r *EnrolmentReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&flexv1.Enrolment{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&flexv1.Site{}, handler.EnqueueRequestsFromMapFunc(r.enrolmentsOfSite)).
		Watches(&flexv1.Proposition{}, handler.EnqueueRequestsFromMapFunc(r.enrolmentsOfProposition),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Named("enrolment").
		WithOptions(opts).
		Complete(r)
}

func (r *EnrolmentReconciler) enrolmentsOfSite(ctx context.Context, site client.Object) []reconcile.Request {
	return childrenOf(ctx, r.Client, &flexv1.EnrolmentList{}, site)
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
