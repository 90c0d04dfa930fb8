package index

import (
	"context"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Changes tells the reads waiting for the cache to change (a site's next status, an asset the
// cache had yet to hold) that it did: every waiter wakes on any event of the kinds it follows
// and looks again. With nobody waiting, an event costs a lock and a comparison.
type Changes struct {
	mu      sync.Mutex
	waiters int
	changed chan struct{}
}

// Follow wakes the waiters on every event of the kinds' informers. Without informers (an
// error getting one), waiters look again on their own.
func (c *Changes) Follow(informers InformerSource, kinds ...client.Object) {
	for _, obj := range kinds {
		inf, err := informers.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
		if err != nil {
			continue
		}
		wake := func(any) { c.notify() }
		_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: wake, DeleteFunc: wake, UpdateFunc: func(_, obj any) { wake(obj) }})
	}
}

// Watch registers a waiter until done: next is a channel closed at the next event after it
// was taken.
func (c *Changes) Watch() (next func() <-chan struct{}, done func()) {
	c.mu.Lock()
	c.waiters++
	c.mu.Unlock()
	next = func() <-chan struct{} {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.changed == nil {
			c.changed = make(chan struct{})
		}
		return c.changed
	}
	done = func() {
		c.mu.Lock()
		c.waiters--
		c.mu.Unlock()
	}
	return next, done
}

func (c *Changes) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiters == 0 || c.changed == nil {
		return
	}
	close(c.changed)
	c.changed = nil
}

// TellChanges makes every change of the kinds' cached objects reach tell while the informer's
// store applies it: an index named name whose function tells the change (the old object and
// the new one) and indexes nothing. The store calls an index's function under its lock for the
// old and the new object of every add, update and delete, before any reader can see the
// change. A delete seen only as an event (a relist that drops an object) is told by an event
// handler too. It answers false, and tells nothing for sure, without informers or when an
// index cannot be added.
func TellChanges(c client.Reader, name string, tell func(obj any), kinds ...client.Object) bool {
	informers, ok := c.(InformerSource)
	if !ok {
		return false
	}
	index := func(obj any) ([]string, error) {
		tell(obj)
		return nil, nil
	}
	deleted := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		tell(obj)
	}
	for _, obj := range kinds {
		inf, err := informers.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
		if err != nil {
			return false
		}
		if err := inf.AddIndexers(toolscache.Indexers{name: index}); err != nil {
			return false
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: deleted}); err != nil {
			return false
		}
	}
	return true
}
