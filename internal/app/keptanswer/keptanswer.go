// Package keptanswer keeps the REST API's encoded eligibility answers, each with what it was
// found current against (docs/architecture.md, "Eligibility: decided once").
package keptanswer

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/metrics"
)

// MaxBytes bounds the kept eligibility answers by the memory they take: 32 MiB,
// ~20,000 sites of two assets (an answer is ~1 KB, ~1.5 KB kept), so that a fleet of 10,000
// sites read in turn is answered from memory. Past the bound, arbitrary sites make room;
// their next read encodes again. flexsite_eligibility_kept_answer_bytes shows what is held.
const MaxBytes = 32 << 20

// answerBookkeeping is what a kept answer costs beside its bytes (entry, map slot,
// the site's identity), and keptAssetBytes what each asset's stamp costs, rounded up.
const (
	answerBookkeeping = 256
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
type Eligibility struct {
	mu       sync.RWMutex
	sites    map[types.NamespacedName]*keptAnswer
	bytes    int
	maxBytes int
}

// keptAnswer is one site's answer and what it was found current against.
type keptAnswer struct {
	uid             types.UID
	resourceVersion string
	catalogue       uint64
	assets          []keptAsset
	body            []byte
	cost            int
}

type keptAsset struct {
	uid             types.UID
	resourceVersion string
}

// New keeps answers up to maxBytes (MaxBytes in the manager).
func New(maxBytes int) *Eligibility {
	return &Eligibility{sites: map[types.NamespacedName]*keptAnswer{}, maxBytes: maxBytes}
}

// Answer is the site's kept answer when it was found current against exactly this site,
// these assets and this catalogue version (nil otherwise). The bytes are shared: read-only.
func (k *Eligibility) Answer(site *flexv1.Site, assets []*flexv1.Asset, catalogue uint64) []byte {
	if k == nil {
		return nil
	}
	k.mu.RLock()
	e := k.sites[types.NamespacedName{Namespace: site.Namespace, Name: site.Name}]
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
	return e.body
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
// body is read-only from then on.
func (k *Eligibility) Keep(site *flexv1.Site, assets []*flexv1.Asset, catalogue uint64, body []byte) {
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
		k.bytes -= old.cost
		delete(k.sites, key)
	}
	if e.cost > k.maxBytes {
		metrics.KeptEligibilityBytes.Set(float64(k.bytes))
		return
	}
	for other, o := range k.sites { // arbitrary sites make room
		if k.bytes+e.cost <= k.maxBytes {
			break
		}
		k.bytes -= o.cost
		delete(k.sites, other)
	}
	k.sites[key] = e
	k.bytes += e.cost
	metrics.KeptEligibilityBytes.Set(float64(k.bytes))
}
