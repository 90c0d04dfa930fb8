package ledger

import (
	"context"
	"fmt"
	"sync"
	"unique"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Feed is the reward ledgers' compact store fed by the manager's shared cache, which watches
// RewardLedgers anyway (the controllers need their metadata and status): the cache's
// transform hands each ledger to Keep before it drops the transactions, and a delete
// handler on the same informer forgets it. One watch and one decode per ledger change: a
// store with a watch of its own decoded every ledger a second time (a year of rewards is
// about 16 KB of short-lived objects per decode, whose holes in the heap outlive them).
// Every replica runs it (the cache is not leader-elected), so every replica serves reads.
//
// Keep goes into the cache's options (index.CacheOptions); Attach, once the cache exists,
// adds the delete handler and the readiness; readers ask Get once HasSynced.
type Feed struct {
	mu      sync.RWMutex
	ledgers map[types.NamespacedName]fedLedger
	synced  toolscache.InformerSynced
}

type fedLedger struct {
	uid    types.UID
	ledger *Ledger
}

// NewFeed is an empty Feed.
func NewFeed() *Feed { return &Feed{ledgers: map[types.NamespacedName]fedLedger{}} }

// Keep stores the compact form of l. The cache's transform calls it for every ledger it
// receives, deleted ones too (Attach's handler forgets those after).
func (f *Feed) Keep(l *flexv1.RewardLedger) {
	compact := fedLedger{uid: l.UID, ledger: New(l.ResourceVersion, l.Spec.Transactions)}
	// The namespace is shared by every ledger of the organisation.
	key := types.NamespacedName{Namespace: unique.Make(l.Namespace).Value(), Name: l.Name}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ledgers[key] = compact
}

// forget drops the ledger namespace/name if it is still the one with uid (a ledger created
// again under the same name since is kept).
func (f *Feed) forget(namespace, name string, uid types.UID) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	f.mu.Lock()
	defer f.mu.Unlock()
	if e, ok := f.ledgers[key]; ok && e.uid == uid {
		delete(f.ledgers, key)
	}
}

// Attach watches c's RewardLedger informer for deletions and takes its readiness.
func (f *Feed) Attach(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &flexv1.RewardLedger{}, cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("watching reward ledgers: %w", err)
	}
	f.synced = inf.HasSynced
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if l, ok := obj.(*flexv1.RewardLedger); ok {
				f.forget(l.Namespace, l.Name, l.UID)
			}
		},
	})
	return err
}

// HasSynced reports whether the cache's first list of ledgers has been stored.
func (f *Feed) HasSynced() bool { return f.synced != nil && f.synced() }

// WaitForSync waits until HasSynced or ctx ends; false if it ended first.
func (f *Feed) WaitForSync(ctx context.Context) bool {
	return toolscache.WaitForCacheSync(ctx.Done(), f.HasSynced)
}

// Get is the ledger namespace/name (nil, false when there is none).
func (f *Feed) Get(namespace, name string) (*Ledger, bool, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	e, ok := f.ledgers[types.NamespacedName{Namespace: namespace, Name: name}]
	return e.ledger, ok, nil
}
