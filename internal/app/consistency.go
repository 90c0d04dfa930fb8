package app

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/resourceversion"
)

// Reads come from the manager's cache, which follows the API server through watches a few
// milliseconds behind. So that a client reads its own writes (onboard, then GET eligibility),
// a request that wrote waits, before it answers, until this replica's cache has seen what it
// wrote. That costs the write a little latency and the API server nothing.

// cacheWaitTimeout bounds the wait; past it the answer goes out anyway (the write succeeded).
const cacheWaitTimeout = 5 * time.Second

const cachePollInterval = 2 * time.Millisecond

// awaitCache waits until the cache holds every written object at (at least) the version the
// write produced, and no longer holds (live) any deleted one.
func (s *Service) awaitCache(ctx context.Context, written, deleted []client.Object) {
	if len(written) == 0 && len(deleted) == 0 {
		return
	}
	pending := append(append([]client.Object(nil), written...), deleted...)
	nWritten := len(written)
	err := wait.PollUntilContextTimeout(ctx, cachePollInterval, cacheWaitTimeout, true, func(ctx context.Context) (bool, error) {
		remaining := pending[:0]
		remainingWritten := 0
		for i, obj := range pending {
			isWrite := i < nWritten
			if !s.cacheHasSeen(ctx, obj, isWrite) {
				remaining = append(remaining, obj)
				if isWrite {
					remainingWritten++
				}
			}
		}
		pending, nWritten = remaining, remainingWritten
		return len(pending) == 0, nil
	})
	if err != nil {
		// Past the timeout, or the request's context ended (its client went): answer anyway.
		s.Log.V(1).Info("cache did not catch up with this request's writes in time", "objects", len(pending))
	}
}

// cacheHasSeen reports whether the cache reflects a write (written: at least the written
// version) or a deletion (gone, or marked for deletion).
func (s *Service) cacheHasSeen(ctx context.Context, obj client.Object, written bool) bool {
	cached := obj.DeepCopyObject().(client.Object)
	err := s.Cache.Get(ctx, client.ObjectKeyFromObject(obj), cached)
	switch {
	case apierrors.IsNotFound(err):
		return !written
	case err != nil:
		return true // nothing to wait for that waiting would fix
	case !written:
		return !cached.GetDeletionTimestamp().IsZero()
	}
	return resourceversion.NotOlder(cached.GetResourceVersion(), obj.GetResourceVersion())
}
