package index

import (
	"fmt"
	"sync"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// KeptSites holds, by namespace and API id, the live Site a lookup of the cache found, for as
// long as no change of a Site with that id is told: the hot reads by site id (a transactions
// page, a battery schedule) then cost one map read instead of an index lookup (the store's
// lock, its index maps, a list and the matches allocated per read: a twentieth of a cached
// transactions page's CPU).
//
// Followed (FollowKeptSites), every change of a cached Site reaches Changed while the cache's
// store applies it (an index function of the store, run under its lock for the old and the new
// object, before any reader sees the change; TellChanges), and drops what is held for the old
// and the new object's id. A site found by a lookup that began before the last change told is
// not held, so what is held is what the lookup would find at that moment. Unfollowed, nothing
// is held and every read looks up. Only found sites are held (one entry a cached site at most,
// dropped when it changes or goes): an unknown id looks up every time.
type KeptSites struct {
	mu   sync.RWMutex
	byID map[keptSiteKey]*flexv1.Site
	// changes counts the changes told; followed is set once every change is told.
	changes  atomic.Uint64
	followed atomic.Bool
}

type keptSiteKey struct{ namespace, id string }

// FollowKeptSites makes every change of the cache's Sites reach k.Changed (TellChanges) and,
// once it does, lets k hold sites. It answers false, and k holds nothing, without informers.
func FollowKeptSites(c client.Reader, k *KeptSites) bool {
	if !TellChanges(c, fmt.Sprintf("flexsite.io/kept-sites-%p", k), k.tell, &flexv1.Site{}) {
		return false
	}
	k.Follow()
	return true
}

// Follow says that from now on every change of a cached Site reaches Changed before a reader
// of the cache can see it.
func (k *KeptSites) Follow() {
	k.changes.Add(1) // an epoch read before now (changes perhaps untold) never matches
	k.followed.Store(true)
}

// tell is Changed for a Site the store is changing (anything else is ignored).
func (k *KeptSites) tell(obj any) {
	if s, ok := obj.(*flexv1.Site); ok {
		k.Changed(s.Namespace, s.Labels[flexv1.IDLabel])
	}
}

// Changed tells that a Site of namespace ns with API id id is changing: what is held for that
// id is dropped. It is called under the cache store's lock: it takes k's lock only.
func (k *KeptSites) Changed(ns, id string) {
	k.changes.Add(1) // before the lock: a Keep that holds the lock next sees it
	k.mu.Lock()
	delete(k.byID, keptSiteKey{ns, id})
	k.mu.Unlock()
}

// Site is the site held for namespace ns and API id id, else look's answer (a lookup of the
// cache's store), held when it found a site and no change was told since it began.
func (k *KeptSites) Site(ns, id string, look func() (*flexv1.Site, error)) (*flexv1.Site, error) {
	if !k.followed.Load() {
		return look()
	}
	k.mu.RLock()
	site := k.byID[keptSiteKey{ns, id}]
	k.mu.RUnlock()
	if site != nil {
		return site, nil
	}
	epoch := k.changes.Load()
	site, err := look()
	if err != nil || site == nil || site.Namespace != ns || site.Labels[flexv1.IDLabel] != id {
		return site, err
	}
	k.mu.Lock()
	if k.changes.Load() == epoch {
		if k.byID == nil {
			k.byID = map[keptSiteKey]*flexv1.Site{}
		}
		// Keyed by the cached object's own strings: nothing of the request is kept.
		k.byID[keptSiteKey{site.Namespace, site.Labels[flexv1.IDLabel]}] = site
	}
	k.mu.Unlock()
	return site, nil
}

// Len is how many sites are held (tests).
func (k *KeptSites) Len() int {
	k.mu.RLock()
	defer k.mu.RUnlock()
	return len(k.byID)
}
