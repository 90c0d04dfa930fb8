package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// watcher is the bench's own view of the cluster, through the same informer machinery the
// manager uses: every Site (status is what scenario 2 times), and the Assets of the
// convergence namespace (their watch events are the raw write -> watch baseline). Event times
// are taken as the handler is called, the same way for a baseline event and a status event.
type watcher struct {
	cache  cache.Cache
	cancel context.CancelFunc
	done   chan struct{}
	sites  *hub
	assets *hub
}

func startWatcher(ctx context.Context, cfg *rest.Config, assetNamespace string) (*watcher, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme: scheme,
		ByObject: map[client.Object]cache.ByObject{
			&flexv1.Asset{}: {Namespaces: map[string]cache.Config{assetNamespace: {}}},
		},
		DefaultTransform: cache.TransformStripManagedFields(),
	})
	if err != nil {
		return nil, err
	}
	w := &watcher{cache: c, done: make(chan struct{}), sites: newHub(), assets: newHub()}
	for obj, h := range map[client.Object]*hub{&flexv1.Site{}: w.sites, &flexv1.Asset{}: w.assets} {
		inf, err := c.GetInformer(ctx, obj)
		if err != nil {
			return nil, err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    h.observe,
			UpdateFunc: func(_, obj any) { h.observe(obj) },
		}); err != nil {
			return nil, err
		}
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	w.cancel = cancel
	go func() {
		defer close(w.done)
		_ = c.Start(runCtx)
	}()
	if !c.WaitForCacheSync(ctx) {
		w.stop()
		return nil, fmt.Errorf("the bench's watch did not sync")
	}
	return w, nil
}

func (w *watcher) stop() {
	w.cancel()
	<-w.done
}

// hub hands the objects an informer delivers to whoever waits for them.
type hub struct {
	mu      sync.Mutex
	waiters map[types.NamespacedName][]*waiter
	// tracker, when set, sees every object (scenario 2's catalogue change).
	tracker func(obj client.Object, at time.Time)
}

type waiter struct {
	cond func(client.Object) bool
	at   chan time.Time
}

func newHub() *hub { return &hub{waiters: map[types.NamespacedName][]*waiter{}} }

// expect returns a channel that receives the time the informer first delivers the object
// key with cond true. Call it before the write that should cause it.
func (h *hub) expect(key types.NamespacedName, cond func(client.Object) bool) <-chan time.Time {
	w := &waiter{cond: cond, at: make(chan time.Time, 1)}
	h.mu.Lock()
	h.waiters[key] = append(h.waiters[key], w)
	h.mu.Unlock()
	return w.at
}

func (h *hub) setTracker(f func(obj client.Object, at time.Time)) {
	h.mu.Lock()
	h.tracker = f
	h.mu.Unlock()
}

func (h *hub) observe(o any) {
	at := time.Now()
	obj, ok := o.(client.Object)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(obj)
	h.mu.Lock()
	waiting := h.waiters[key]
	var left []*waiter
	for _, w := range waiting {
		if w.cond(obj) {
			w.at <- at
		} else {
			left = append(left, w)
		}
	}
	if len(left) == 0 {
		delete(h.waiters, key)
	} else {
		h.waiters[key] = left
	}
	tracker := h.tracker
	h.mu.Unlock()
	if tracker != nil {
		tracker(obj, at)
	}
}

// await waits for an expected event and returns how long after start it came.
func await(ctx context.Context, ch <-chan time.Time, start time.Time, limit time.Duration, what string) (time.Duration, error) {
	select {
	case at := <-ch:
		return at.Sub(start), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(limit):
		return 0, fmt.Errorf("no %s within %s", what, limit)
	}
}
