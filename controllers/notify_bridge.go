package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/flexsite/flexsite/internal/db"
)

// bridgeTargets tells a bridge what to reconcile: of, the objects a notified key names; all,
// every object that may have changed unheard, after a reconnection.
type bridgeTargets struct {
	of  func(ctx context.Context, key types.NamespacedName) []client.Object
	all func(ctx context.Context) []client.Object
}

// bridge carries PostgreSQL's notifications to a controller's channel source: listen runs a
// store's listener (over db.Watch, until ctx ends) that only records in changes (never
// blocking the listening goroutine); the bridge's goroutine resolves the keys to objects
// (which may read the API) and waits for the controller, however slow it is.
func bridge(ch chan<- event.GenericEvent, listen func(ctx context.Context, changes *db.Changes[types.NamespacedName]),
	t bridgeTargets) func(context.Context) error {
	return func(ctx context.Context) error {
		changes := db.NewChanges[types.NamespacedName]()
		go listen(ctx, changes)
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-changes.Wake():
			}
			keys, resync := changes.Take()
			var objs []client.Object
			if resync {
				objs = t.all(ctx)
			}
			for key := range keys {
				objs = append(objs, t.of(ctx, key)...)
			}
			for _, obj := range objs {
				select {
				case ch <- event.GenericEvent{Object: obj}:
				case <-ctx.Done():
					return nil
				}
			}
		}
	}
}
