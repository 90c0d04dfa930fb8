package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/resourceversion"
)

// statusWrites remembers, per object, the resourceVersion a reconciler's own last status
// write produced, until the cache has caught up with it. A reconcile that runs in between
// (another event about the object queued while the write was on its way) would work on a
// copy without that write, compute the same status again and write it again: a write the
// API server takes as a no-op, but a write (the bench counted one in ~1,000 onboards). Such
// a reconcile instead looks again a moment later, on a copy that has the write.
type statusWrites struct{ versions sync.Map }

// cacheLagRetryDelay is how soon a reconcile that found the cache behind its own write runs
// again: the watch event is normally milliseconds away.
const cacheLagRetryDelay = 50 * time.Millisecond

// wrote records the version obj has after a status write.
func (w *statusWrites) wrote(obj client.Object) {
	if w != nil {
		w.versions.Store(client.ObjectKeyFromObject(obj), obj.GetResourceVersion())
	}
}

// behind tells whether the cached copy obj is older than the reconciler's last write to it;
// once it is not, the record is dropped.
func (w *statusWrites) behind(obj client.Object) bool {
	if w == nil {
		return false
	}
	key := client.ObjectKeyFromObject(obj)
	v, ok := w.versions.Load(key)
	if !ok {
		return false
	}
	if resourceversion.Older(obj.GetResourceVersion(), v.(string)) {
		return true
	}
	w.versions.CompareAndDelete(key, v)
	return false
}

// forget drops the record of an object that is gone.
func (w *statusWrites) forget(key types.NamespacedName) {
	if w != nil {
		w.versions.Delete(key)
	}
}
