// Package statuswrites remembers a reconciler's own status writes until its cache shows them,
// so that a reconcile never works from a copy older than what it wrote itself.
package statuswrites

import (
	"context"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/resourceversion"
)

// Writes remembers, per object, the resourceVersion a reconciler's own last status
// write produced, until the cache has caught up with it. A reconcile that runs in between
// (another event about the object queued while the write was on its way) would work on a
// copy without that write, compute the same status again and write it again: a write the
// API server takes as a no-op, but a write (the bench counted one in ~1,000 onboards). Such
// a reconcile instead looks again a moment later, on a copy that has the write.
//
// A status write does not queue a reconcile of its own (the controllers' predicates let
// only spec and label changes through), so a record is not always met again: records older
// than statusWriteMemory are dropped, as the next write finds them. A cache that lags that
// far behind is not what this guards against.
type Writes struct {
	mu        sync.Mutex
	versions  map[types.NamespacedName]write
	lastSweep time.Time
	// now is the clock (tests move it by hand).
	now func() time.Time
}

type write struct {
	version string
	at      time.Time
}

// cacheLagRetryDelay is how soon a reconcile that found the cache behind its own write runs
// again: the watch event is normally milliseconds away.
const cacheLagRetryDelay = 50 * time.Millisecond

// statusWriteMemory is how long a status write is remembered at most.
const statusWriteMemory = 30 * time.Second

func (w *Writes) clock() time.Time {
	if w.now != nil {
		return w.now()
	}
	return time.Now()
}

// Wrote records the version obj has after a status write, and drops the records past
// statusWriteMemory (once per statusWriteMemory: a sweep of every record).
func (w *Writes) Wrote(obj client.Object) {
	if w == nil {
		return
	}
	now := w.clock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.versions == nil {
		w.versions = map[types.NamespacedName]write{}
	}
	if now.Sub(w.lastSweep) >= statusWriteMemory {
		for key, rec := range w.versions {
			if now.Sub(rec.at) >= statusWriteMemory {
				delete(w.versions, key)
			}
		}
		w.lastSweep = now
	}
	w.versions[client.ObjectKeyFromObject(obj)] = write{version: obj.GetResourceVersion(), at: now}
}

// Fetch reads the object key into obj from c (the cache), for a reconcile: done when there
// is nothing to reconcile now, with what Reconcile returns. It is not when the object is gone
// (its record is forgotten) or the read failed, nor while the cached copy is behind the
// reconciler's own last status write (it looks again after cacheLagRetryDelay).
func (w *Writes) Fetch(ctx context.Context, c client.Reader, key types.NamespacedName, obj client.Object) (
	done bool, res ctrl.Result, err error) {
	if err := c.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			w.Forget(key)
		}
		return true, ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if w.Behind(obj) {
		return true, ctrl.Result{RequeueAfter: cacheLagRetryDelay}, nil
	}
	return false, ctrl.Result{}, nil
}

// Behind tells whether the cached copy obj is older than the reconciler's last write to it;
// once it is not (or the record is past statusWriteMemory), the record is dropped.
func (w *Writes) Behind(obj client.Object) bool {
	if w == nil {
		return false
	}
	key := client.ObjectKeyFromObject(obj)
	now := w.clock()
	w.mu.Lock()
	defer w.mu.Unlock()
	rec, ok := w.versions[key]
	if !ok {
		return false
	}
	if now.Sub(rec.at) < statusWriteMemory && resourceversion.Older(obj.GetResourceVersion(), rec.version) {
		return true
	}
	delete(w.versions, key)
	return false
}

// Forget drops the record of an object that is gone.
func (w *Writes) Forget(key types.NamespacedName) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.versions, key)
}
