package controllers

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/outboxstore"
)

// +kubebuilder:rbac:groups=flexsite.io,resources=subscriptions,verbs=get;list;watch

// The reconcilers write the notification events of the changes they observe to the outbox in
// PostgreSQL (internal/outboxstore) before the status write that shows the change: this file
// is their glue. See internal/events's package comment for who writes which event.

// notifier writes a reconciler's events to the outbox.
type notifier struct {
	// Subscriptions are read from here (the cache): events no subscription of the
	// organisation wants are not written.
	Subscriptions client.Reader
	Store         *outboxstore.Store
}

// subscriptionsIn lists the namespace's subscriptions from the cache.
func subscriptionsIn(ctx context.Context, c client.Reader, namespace string) ([]flexv1.Subscription, error) {
	list := &flexv1.SubscriptionList{}
	if err := c.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return nil, err
	}
	return list.Items, nil
}

// wanted keeps the changes a subscription of the namespace wants.
func (n notifier) wanted(ctx context.Context, namespace string, changes []events.Change) ([]events.Change, error) {
	if len(changes) == 0 {
		return nil, nil
	}
	subs, err := subscriptionsIn(ctx, n.Subscriptions, namespace)
	if err != nil {
		return nil, err
	}
	return events.Wanted(changes, subs), nil
}

// report writes the changes a subscription wants of obj's stream (what one reconciler reports
// of it), once: a reconcile redone after a conflict or a crash computes the same changes and
// finds them written (events.Digest). Called before the status write that shows the change:
// when it fails, the reconcile fails without writing status, and is tried again.
func (n notifier) report(ctx context.Context, obj client.Object, stream string, changes []events.Change, now time.Time) error {
	wanted, err := n.wanted(ctx, obj.GetNamespace(), changes)
	if err != nil || len(wanted) == 0 {
		return err
	}
	evs := make([]events.Event, len(wanted))
	for i, c := range wanted {
		evs[i] = events.Stamp(c, now)
	}
	_, err = n.Store.Report(ctx, obj.GetNamespace(), string(obj.GetUID())+"/"+stream, events.Digest(wanted), evs)
	return err
}

// final writes the event of obj's deletion, with an id derived from its uid, so that a
// finalizer that runs again writes it once. The object does not wait for its delivery.
func (n notifier) final(ctx context.Context, obj client.Object, last events.Change, now time.Time) error {
	wanted, err := n.wanted(ctx, obj.GetNamespace(), []events.Change{last})
	if err != nil || len(wanted) == 0 {
		return err
	}
	return n.Store.Add(ctx, obj.GetNamespace(), []events.Event{events.StampAs(last, events.RemovalID(string(obj.GetUID())), now)})
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

// writesStatus tells whether summary.patch will write a reconcile's outcome err on an object
// observed as base: not on a conflict, nor on a brief wait for an object never observed.
// Events are written only then: the change they report is about to be shown.
func writesStatus(base statusObject, err error) bool {
	var wait *waitingError
	return !apierrors.IsConflict(err) && (!errors.As(err, &wait) || !wait.brief || base.GetObservedGeneration() >= 1)
}
