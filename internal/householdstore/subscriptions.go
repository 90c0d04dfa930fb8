package householdstore

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/validation"
)

// SubscriptionRoom refuses another notification subscription in namespace when the
// organisation already has maxSubs live ones (validation.SubscriptionsFull; nil while there is
// room). It counts in cache, the manager's informer cache, whose List in a namespace reads its
// namespace index: no API-server request, and at most the organisation's subscriptions (the
// cap, or the few made before it) are visited. Two creates racing past the cache may both get
// in; the count refuses the next.
func SubscriptionRoom(ctx context.Context, cache client.Reader, namespace string, maxSubs int) error {
	list := &flexv1.SubscriptionList{}
	if err := cache.List(ctx, list, client.InNamespace(namespace)); err != nil {
		return err
	}
	live := 0
	for i := range list.Items {
		if list.Items[i].DeletionTimestamp.IsZero() {
			live++
		}
	}
	return validation.SubscriptionsFull(live, maxSubs)
}
