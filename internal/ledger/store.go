package ledger

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Store watches every RewardLedger and keeps each in compact form (Ledger), for the read
// path: the manager's shared cache does not hold RewardLedgers (only their metadata, for
// the Site controller), so a replica holds its reward history once, at a fifth of the size.
//
// It is a client-go informer: the API server's list and watch, each object converted to a
// Ledger as it arrives (a transform, so the decoded object is garbage at once). Start runs
// it (a manager Runnable); readers ask Get once HasSynced.
type Store struct {
	informer toolscache.SharedIndexInformer
}

// NewStore watches RewardLedgers through c (a client with Watch, e.g. client.NewWithWatch).
func NewStore(c client.WithWatch) *Store {
	lw := &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			list := &flexv1.RewardLedgerList{}
			return list, c.List(ctx, list, &client.ListOptions{Raw: &opts})
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return c.Watch(ctx, &flexv1.RewardLedgerList{}, &client.ListOptions{Raw: &opts})
		},
	}
	inf := toolscache.NewSharedIndexInformer(lw, &flexv1.RewardLedger{}, 0, toolscache.Indexers{})
	if err := inf.SetTransform(compact); err != nil {
		panic(err) // only before Run
	}
	return &Store{informer: inf}
}

// entry is what the informer keeps of a RewardLedger.
type entry struct {
	namespace, name string
	ledger          *Ledger
}

// GetObjectMeta gives the informer the key (namespace/name) and version of the entry.
func (e *entry) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: e.namespace, Name: e.name, ResourceVersion: e.ledger.ResourceVersion}
}

// compact converts a RewardLedger to its entry; anything else (a tombstone) passes through.
func compact(obj any) (any, error) {
	l, ok := obj.(*flexv1.RewardLedger)
	if !ok {
		return obj, nil
	}
	return &entry{namespace: l.Namespace, name: l.Name, ledger: New(l.ResourceVersion, l.Spec.Transactions)}, nil
}

// Start runs the informer until ctx ends.
func (s *Store) Start(ctx context.Context) error {
	s.informer.RunWithContext(ctx)
	return nil
}

// NeedLeaderElection is false: every replica serves reads.
func (s *Store) NeedLeaderElection() bool { return false }

// HasSynced reports whether the first list has been stored.
func (s *Store) HasSynced() bool { return s.informer.HasSynced() }

// WaitForSync waits until HasSynced or ctx ends; false if it ended first.
func (s *Store) WaitForSync(ctx context.Context) bool {
	return toolscache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced)
}

// Get is the ledger namespace/name (nil, false when there is none).
func (s *Store) Get(namespace, name string) (*Ledger, bool, error) {
	obj, ok, err := s.informer.GetIndexer().GetByKey(namespace + "/" + name)
	if err != nil || !ok {
		return nil, false, err
	}
	e, isEntry := obj.(*entry)
	if !isEntry {
		return nil, false, fmt.Errorf("reward ledger store holds a %T", obj)
	}
	return e.ledger, true, nil
}
