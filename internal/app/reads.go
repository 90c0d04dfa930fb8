package app

import (
	"context"
	"fmt"
	"sync"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/keptanswer"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// readIndexes look cached Sites and Assets up by their field indexes straight in the
// informers' indexers, for the two hot reads (eligibility, transactions): a List through the
// cache copies every match into a new list by reflection, which was a fifth of such a read's
// CPU and most of its garbage. What they return are the cached objects themselves, shared:
// read-only, like any UnsafeDisableDeepCopy read. Every index lookup of this package's hot
// reads is one of the two methods below.
type readIndexes struct {
	lookup index.Lookup
	// changes wakes the reads that wait for a site's next status (eligibility.go).
	changes *cacheChanges
}

// newReadIndexes finds the indexers of the cache's Site and Asset informers (nil when the
// cache is not informer-backed: reads then List as before).
func newReadIndexes(c client.Reader) *readIndexes {
	sites, assets := index.StoreOf(c, &flexv1.Site{}), index.StoreOf(c, &flexv1.Asset{})
	if sites == nil || assets == nil {
		return nil
	}
	ri := &readIndexes{lookup: index.NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Site{}: sites, &flexv1.Asset{}: assets}),
		changes: &cacheChanges{}}
	if informers, ok := c.(index.InformerSource); ok {
		ri.changes.follow(informers, &flexv1.Site{}, &flexv1.Asset{})
	}
	return ri
}

// site is the live Site of namespace ns with API id id (nil when none).
func (ri *readIndexes) site(ns, id string) (*flexv1.Site, error) {
	sites, err := ri.lookup.SitesByID(context.Background(), ns, id) // the stores at hand: no wait
	if err != nil {
		return nil, err
	}
	for _, s := range sites {
		if s.DeletionTimestamp.IsZero() {
			return s, nil
		}
	}
	return nil, nil
}

// assetsOf are the site's cached Assets (those being deleted too: household.EvaluateAssets
// and household.EligibilityInputsOf leave them out), in the index's order (any: an
// evaluation orders its assets, and EligibilityInputsOf digests them in any order).
func (ri *readIndexes) assetsOf(site *flexv1.Site) ([]*flexv1.Asset, error) {
	return ri.lookup.AssetsOfSite(context.Background(), site.Namespace, site.Name) // the stores at hand: no wait
}

// cacheChanges tells the reads waiting for the cache to change (a site's next status, an
// asset the cache had yet to hold) that it did: every waiter wakes on any Site or Asset
// event and looks again. With nobody waiting, an event costs a lock and a comparison.
type cacheChanges struct {
	mu      sync.Mutex
	waiters int
	changed chan struct{}
}

// follow wakes the waiters on every event of the kinds' informers. Without informers
// (an error getting one), waiters look again on their own (eligibilityRecheck).
func (c *cacheChanges) follow(informers index.InformerSource, kinds ...client.Object) {
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

// followKept makes every change of a cached Site or Asset reach kept.Changed while the
// informer's store applies it: an index of the store whose function tells the change (the
// old object's site and the new one's) and indexes nothing. The store calls an index's
// function under its lock for the old and the new object of every add, update and delete,
// before any reader can see the change; that is what lets kept serve an answer by site id
// without looking the site and its assets up (keptanswer.Eligibility.Current). A delete seen
// only as an event (a relist that drops an object) is told by an event handler too. Without
// informers, or when either kind's index cannot be added, kept is not followed: every read
// looks up.
func followKept(c client.Reader, kept *keptanswer.Eligibility) {
	informers, ok := c.(index.InformerSource)
	if !ok || kept == nil {
		return
	}
	tell := keptChanges(kept)
	for _, obj := range []client.Object{&flexv1.Site{}, &flexv1.Asset{}} {
		inf, err := informers.GetInformer(context.Background(), obj, cache.BlockUntilSynced(false))
		if err != nil {
			return
		}
		if err := inf.AddIndexers(toolscache.Indexers{keptChangesIndex(kept): tell}); err != nil {
			return
		}
		deleted := func(obj any) {
			if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			_, _ = tell(obj)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: deleted}); err != nil {
			return
		}
	}
	kept.Follow()
}

// keptChangesIndex names the index that tells kept the changes: one per Service on a cache.
func keptChangesIndex(kept *keptanswer.Eligibility) string {
	return fmt.Sprintf("flexsite.io/kept-eligibility-%p", kept)
}

// keptChanges is the index function that tells kept each change of a Site or an Asset (the
// site it belongs to) and indexes nothing.
func keptChanges(kept *keptanswer.Eligibility) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		switch o := obj.(type) {
		case *flexv1.Site:
			kept.Changed(o.Namespace, o.Name)
		case *flexv1.Asset:
			kept.Changed(o.Namespace, o.Spec.SiteName)
		}
		return nil, nil
	}
}

// watch registers a waiter until done: next is a channel closed at the next event after it
// was taken.
func (c *cacheChanges) watch() (next func() <-chan struct{}, done func()) {
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

func (c *cacheChanges) notify() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.waiters == 0 || c.changed == nil {
		return
	}
	close(c.changed)
	c.changed = nil
}

// EncodedJSON is an answer already encoded as encoding/json's Encoder would (HTML-safe, a
// trailing newline): a door sends it as it is.
type EncodedJSON []byte

// rulesToRead are the rules in force for an answer that only reads (GET eligibility): from
// the householdstore.Catalogue kept up to date by the cache's informers, without listing the
// catalogue per request, when the cache has informers; else listed (householdstore.LoadRules).
// version is the catalogue's (householdstore.Catalogue.Version; 0 without one).
func (s *Service) rulesToRead(ctx context.Context) (rules eligibility.Rules, version uint64, err error) {
	if s.catalogue != nil {
		return s.catalogue.RulesAt(ctx)
	}
	rules, err = householdstore.LoadRules(ctx, s.Cache)
	return rules, 0, err
}
