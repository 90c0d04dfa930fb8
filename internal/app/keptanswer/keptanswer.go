// Package keptanswer keeps the REST API's encoded eligibility answers, each with what it was
// found current against (docs/architecture.md, "Eligibility: decided once").
package keptanswer

import (
	"sync"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/metrics"
)

// MaxBytes bounds the kept eligibility answers by the memory they take: 32 MiB,
// ~20,000 sites of two assets (an answer is ~1 KB, ~1.5 KB kept), so that a fleet of 10,000
// sites read in turn is answered from memory. Past the bound, arbitrary sites make room;
// their next read encodes again. flexsite_eligibility_kept_answer_bytes shows what is held.
const MaxBytes = 32 << 20

// answerBookkeeping is what a kept answer costs beside its bytes (entry, map slots,
// the site's identity), and keptAssetBytes what each asset's stamp costs, rounded up.
const (
	answerBookkeeping = 320
	keptAssetBytes    = 96
)

// Eligibility keeps each site's encoded eligibility answer with what it was found current
// against, so that the read of an unchanged site costs its lookups, a comparison and the
// bytes (docs/performance.md). The answer is the site's status (and its spec's site issues,
// its id label): fixed for the site's identity (UID) and resourceVersion. Whether that status
// is current depends on the site's assets and the catalogue too (household.CurrentEligibility),
// so an answer is served only while the site, every one of its cached assets
// (UID and resourceVersion) and the catalogue's version (householdstore.Catalogue.Version)
// are exactly those it was found current against; anything else is a miss, read and encoded
// afresh. The answer does not depend on who asks: the caller's reach is checked before the
// lookup (app.Reaches), and entries are keyed by namespace and name.
//
// Followed (Follow), it also answers by site id without the lookups (Current): every change of
// a cached Site or Asset reaches Changed while the cache's store applies it (an index function
// of the store, run under its lock, before any reader sees the change), and drops the answers
// of that site; an answer kept from lookups made since the last change (Epoch) stands until
// the next one. So an answer served by id is one the lookups would have served at that moment.
type Eligibility struct {
	mu       sync.RWMutex
	sites    map[types.NamespacedName]*keptAnswer
	bytes    int
	maxBytes int

	// byID holds, by namespace and site id, the answers that stand while their site and its
	// assets are unchanged (kept while followed, since the change epoch their lookups began in).
	byID map[types.NamespacedName]*keptAnswer
	// changes counts the changes told (Changed); followed is set once every change is told.
	changes  atomic.Uint64
	followed atomic.Bool
}

// keptAnswer is one site's answer and what it was found current against.
type keptAnswer struct {
	uid             types.UID
	resourceVersion string
	catalogue       uint64
	assets          []keptAsset
	body            []byte
	cost            int
	// site is the cached Site it was found for (read-only), and id its API id, when the answer
	// is held by id too (byID).
	site *flexv1.Site
	id   string
}

type keptAsset struct {
	uid             types.UID
	resourceVersion string
}

// New keeps answers up to maxBytes (MaxBytes in the manager).
func New(maxBytes int) *Eligibility {
	return &Eligibility{sites: map[types.NamespacedName]*keptAnswer{}, byID: map[types.NamespacedName]*keptAnswer{},
		maxBytes: maxBytes}
}

// Follow tells that from now on every change of a cached Site or Asset reaches Changed before
// a reader of the cache can see it: answers are then also kept and served by site id.
func (k *Eligibility) Follow() {
	if k != nil {
		k.followed.Store(true)
		k.changes.Add(1) // an epoch read before now (changes perhaps untold) never matches
	}
}

// Epoch is the count of changes told so far (and of Follow), read before a read looks its
// site and assets up (Keep).
func (k *Eligibility) Epoch() uint64 {
	if k == nil {
		return 0
	}
	return k.changes.Load()
}

// Changed tells that the Site ns/siteName, or one of its Assets, is changing: its answers
// are dropped. It is called under the cache store's lock: it takes k's lock only.
func (k *Eligibility) Changed(ns, siteName string) {
	if k == nil {
		return
	}
	k.changes.Add(1) // before the lock: a Keep that holds the lock next sees it
	key := types.NamespacedName{Namespace: ns, Name: siteName}
	k.mu.Lock()
	defer k.mu.Unlock()
	if e := k.sites[key]; e != nil {
		k.dropLocked(key, e)
		metrics.KeptEligibilityBytes.Set(float64(k.bytes))
	}
}

// Current is the answer held by id for the site with API id id in namespace ns, with the
// cached site it was found for (read-only), when neither has changed since and the catalogue
// is at version catalogue; nil and nil otherwise. The caller checks the caller's reach
// (app.Reaches) on the site before it serves the bytes (shared: read-only).
func (k *Eligibility) Current(ns, id string, catalogue uint64) (*flexv1.Site, []byte) {
	if k == nil || !k.followed.Load() {
		return nil, nil
	}
	k.mu.RLock()
	e := k.byID[types.NamespacedName{Namespace: ns, Name: id}]
	k.mu.RUnlock()
	if e == nil || e.catalogue != catalogue {
		return nil, nil
	}
	return e.site, e.body
}

// dropLocked forgets the entry e of key (k.mu held).
func (k *Eligibility) dropLocked(key types.NamespacedName, e *keptAnswer) {
	k.bytes -= e.cost
	delete(k.sites, key)
	if e.id != "" {
		idKey := types.NamespacedName{Namespace: key.Namespace, Name: e.id}
		if k.byID[idKey] == e {
			delete(k.byID, idKey)
		}
	}
}

// Answer is the site's kept answer when it was found current against exactly this site,
// these assets and this catalogue version (nil otherwise). The bytes are shared: read-only.
// epoch is what Epoch said before the site and its assets were looked up: an answer served
// while no change was told since is held by the site's id from then on (Current), as Keep
// holds it. site is the cached object, read-only.
func (k *Eligibility) Answer(site *flexv1.Site, assets []*flexv1.Asset, catalogue, epoch uint64) []byte {
	if k == nil {
		return nil
	}
	key := types.NamespacedName{Namespace: site.Namespace, Name: site.Name}
	k.mu.RLock()
	e := k.sites[key]
	k.mu.RUnlock()
	if e == nil || e.uid != site.UID || e.resourceVersion != site.ResourceVersion || e.catalogue != catalogue ||
		len(e.assets) != len(assets) {
		return nil
	}
	for _, a := range assets { // a handful: the index answers them in any order
		if !e.holds(a) {
			return nil
		}
	}
	if e.id == "" && k.followed.Load() && k.changes.Load() == epoch {
		k.mu.Lock()
		if k.sites[key] == e {
			k.holdByIDLocked(e, site, epoch)
		}
		k.mu.Unlock()
	}
	return e.body
}

// holdByIDLocked holds e by its site's id too when k is followed and no change was told since
// epoch (k.mu held).
func (k *Eligibility) holdByIDLocked(e *keptAnswer, site *flexv1.Site, epoch uint64) {
	if id := site.Labels[flexv1.IDLabel]; id != "" && k.followed.Load() && k.changes.Load() == epoch {
		e.site, e.id = site, id
		k.byID[types.NamespacedName{Namespace: site.Namespace, Name: id}] = e
	}
}

func (e *keptAnswer) holds(a *flexv1.Asset) bool {
	for _, s := range e.assets {
		if s.uid == a.UID {
			return s.resourceVersion == a.ResourceVersion
		}
	}
	return false
}

// Keep keeps body, found current against this site, these assets and this catalogue version;
// body is read-only from then on. epoch is what Epoch said before the site and its assets
// were looked up: when k is followed and no change was told since, the answer is held by the
// site's id too (Current) until the next change of the site or its assets. site is the cached
// object, read-only.
func (k *Eligibility) Keep(site *flexv1.Site, assets []*flexv1.Asset, catalogue, epoch uint64, body []byte) {
	if k == nil || site.ResourceVersion == "" {
		return
	}
	e := &keptAnswer{uid: site.UID, resourceVersion: site.ResourceVersion, catalogue: catalogue,
		assets: make([]keptAsset, len(assets)), body: body,
		cost: answerBookkeeping + len(body) + keptAssetBytes*len(assets)}
	for i, a := range assets {
		e.assets[i] = keptAsset{uid: a.UID, resourceVersion: a.ResourceVersion}
	}
	key := types.NamespacedName{Namespace: site.Namespace, Name: site.Name}
	k.mu.Lock()
	defer k.mu.Unlock()
	if old := k.sites[key]; old != nil {
		k.dropLocked(key, old)
	}
	if e.cost > k.maxBytes {
		metrics.KeptEligibilityBytes.Set(float64(k.bytes))
		return
	}
	for other, o := range k.sites { // arbitrary sites make room
		if k.bytes+e.cost <= k.maxBytes {
			break
		}
		k.dropLocked(other, o)
	}
	k.holdByIDLocked(e, site, epoch)
	k.sites[key] = e
	k.bytes += e.cost
	metrics.KeptEligibilityBytes.Set(float64(k.bytes))
}
