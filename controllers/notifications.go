package controllers

import (
	"context"
	"errors"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/metrics"
)

// +kubebuilder:rbac:groups=flexsite.io,resources=subscriptions,verbs=get;list;watch

// The reconcilers record notification events (internal/events) in the status patch that makes
// the change they report: this file is their glue. See internal/events's package comment for
// where each event is recorded and why deletions keep their finalizer until delivered.

// outboxObject is a kind with a notification outbox.
type outboxObject interface {
	client.Object
	GetPendingEvents() []flexv1.PendingEvent
	SetPendingEvents([]flexv1.PendingEvent)
}

// notificationPollInterval is how often an object held for its undelivered events looks
// again (the deliverer's status writes do not trigger its reconciler).
const notificationPollInterval = 5 * time.Second

// subscriptionsIn lists the namespace's subscriptions from the cache.
func subscriptionsIn(ctx context.Context, c client.Reader, namespace string) ([]flexv1.Subscription, error) {
	list := &flexv1.SubscriptionList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// recordEvents appends to obj's outbox the changes a subscription of its namespace wants.
func recordEvents(ctx context.Context, c client.Reader, obj outboxObject, changes []events.Change, now time.Time) error {
	if len(changes) == 0 {
		return nil
	}
	subs, err := subscriptionsIn(ctx, c, obj.GetNamespace())
	if err != nil {
		return err
	}
	out, dropped := events.Record(obj.GetPendingEvents(), changes, subs, now, 0)
	obj.SetPendingEvents(out)
	if dropped > 0 {
		metrics.NotificationsDropped.WithLabelValues(metrics.DropOutboxFull).Add(float64(dropped))
	}
	return nil
}

// siteIDOf reads the API id of a site (from the cache); "" when it does not exist.
func siteIDOf(ctx context.Context, c client.Reader, namespace, name string) (string, error) {
	site := &flexv1.Site{}
	err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, site)
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	return site.Labels[flexv1.IDLabel], err
}

// holdForNotifications is the finalizer's part of the outbox: an object being deleted first
// records its last event (when one is wanted) in its status, with a FinalEventRecorded
// condition in the same write so that it is recorded once, then keeps its finalizer until
// its outbox is empty. It answers a waiting error while it holds.
func holdForNotifications(ctx context.Context, c client.Client, obj outboxStatusObject, last events.Change, now time.Time) error {
	if meta.FindStatusCondition(obj.GetConditions(), flexv1.FinalEventRecordedCondition) == nil {
		base := obj.DeepCopyObject().(outboxStatusObject)
		if err := recordEvents(ctx, c, obj, []events.Change{last}, now); err != nil {
			return err
		}
		if len(obj.GetPendingEvents()) != len(base.GetPendingEvents()) {
			conds := obj.GetConditions()
			meta.SetStatusCondition(&conds, metav1.Condition{Type: flexv1.FinalEventRecordedCondition,
				Status: metav1.ConditionTrue, ObservedGeneration: obj.GetGeneration(), Reason: flexv1.ReasonNotificationsPending,
				Message: "The deletion's notification is recorded; the object goes once it is delivered"})
			obj.SetConditions(conds)
			if err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
				return err
			}
		}
	}
	if len(obj.GetPendingEvents()) > 0 {
		return waiting(notificationPollInterval, flexv1.ReasonNotificationsPending,
			"Waiting for the notifications of this object to be delivered")
	}
	return nil
}

// outboxStatusObject is a reconciled kind with an outbox.
type outboxStatusObject interface {
	statusObject
	GetPendingEvents() []flexv1.PendingEvent
	SetPendingEvents([]flexv1.PendingEvent)
}

// writesStatus tells whether summary.patch will write a reconcile's outcome err on an object
// observed as base: not on a conflict, nor on a brief wait for an object never observed.
// Events are recorded only then: they ride in that write.
func writesStatus(base statusObject, err error) bool {
	var wait *waitingError
	return !apierrors.IsConflict(err) && (!errors.As(err, &wait) || !wait.brief || base.GetObservedGeneration() >= 1)
}

// statusPatch is the patch summary.patch writes: a merge patch, carrying the resourceVersion
// when it changes the outbox, so that it cannot put back events the deliverer has just
// settled nor lose ones it has just marked (a conflict redoes the reconcile from fresh state).
func statusPatch(base, obj statusObject) client.Patch {
	b, okB := base.(outboxObject)
	o, okO := obj.(outboxObject)
	if okB && okO && !equality.Semantic.DeepEqual(b.GetPendingEvents(), o.GetPendingEvents()) {
		return client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})
	}
	return client.MergeFrom(base)
}

// handOverToSite is an Enrolment finalizer's part of the outbox: the enrolment's undelivered
// events, and its enrolment.changed "removed" when a subscription wants it, move into its
// Site's outbox (one status write of the site, with optimistic concurrency) before the
// finalizer goes, so the enrolment is not held back by a slow receiver (an unenrol followed
// by an enrol goes through at once) and nothing is lost. The "removed" event's id derives from
// the enrolment's uid: a finalize retried after the hand-over hands the same event over, and
// the site's outbox holds it once. With no site left, there is nobody to tell.
func handOverToSite(ctx context.Context, c client.Client, fresh client.Reader, enr *flexv1.Enrolment, now time.Time) error {
	siteKey := types.NamespacedName{Namespace: enr.Namespace, Name: enr.Spec.SiteName}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		site := &flexv1.Site{}
		if err := fresh.Get(ctx, siteKey, site); err != nil {
			return client.IgnoreNotFound(err)
		}
		subs, err := subscriptionsIn(ctx, c, enr.Namespace)
		if err != nil {
			return err
		}
		pending := slices.Clone(enr.Status.PendingEvents)
		removed := events.EnrolmentRemovedChange(enr, site.Labels[flexv1.IDLabel])
		if events.AnyWants(subs, removed.Type) {
			pending = append(pending, events.StampAs(removed, events.RemovalID(string(enr.UID)), now))
		}
		if len(pending) == 0 {
			return nil
		}
		base := site.DeepCopy()
		out, changed, dropped := events.HandOver(site.Status.PendingEvents, pending, 0)
		if !changed {
			return nil
		}
		if dropped > 0 {
			metrics.NotificationsDropped.WithLabelValues(metrics.DropOutboxFull).Add(float64(dropped))
		}
		site.Status.PendingEvents = out
		return c.Status().Patch(ctx, site, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
	})
}
