package facade

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// encodedJSON is an answer already encoded as encodeJSON would (trailing newline included):
// writeJSON sends it as it is.
type encodedJSON []byte

// maxEligibilityAnswers bounds eligibilityAnswers: at a few hundred bytes an answer, a few
// MiB at most. Past it, an arbitrary answer makes room (the next read of its site
// evaluates again).
const maxEligibilityAnswers = 8192

// eligibilityAnswers keeps the last encoded GET eligibility answer of each site read, with
// what it was computed from: the Site's and every Asset's resourceVersion (in the order the
// index gave them) and the catalogue's version (household.Catalogue.VersionedRules). The
// answer is a pure function of those (household.EvaluateAssets), so a kept answer is served
// only while every one of them is unchanged: any write to the site or an asset, an asset
// added or removed, or a catalogue event, and the next read evaluates afresh. Nothing is
// staler than the cache the evaluation itself would read.
type eligibilityAnswers struct {
	mu      sync.RWMutex
	entries map[types.UID]*eligibilityAnswer
	max     int
}

// eligibilityAnswer is one site's kept answer and its inputs' versions.
type eligibilityAnswer struct {
	siteVersion string
	rules       uint64
	assets      []objectVersion
	body        encodedJSON
}

type objectVersion struct {
	uid     types.UID
	version string
}

func newEligibilityAnswers(maxEntries int) *eligibilityAnswers {
	return &eligibilityAnswers{entries: map[types.UID]*eligibilityAnswer{}, max: maxEntries}
}

// matches reports whether the answer was computed from exactly these inputs.
func (e *eligibilityAnswer) matches(site *flexv1.Site, assets []*flexv1.Asset, rules uint64) bool {
	if e.siteVersion != site.ResourceVersion || e.rules != rules || len(e.assets) != len(assets) {
		return false
	}
	for i, a := range assets {
		if e.assets[i].uid != a.UID || e.assets[i].version != a.ResourceVersion {
			return false
		}
	}
	return true
}

// get is the kept answer for these inputs (nil when there is none). Objects without a UID or
// resourceVersion (never stored) are never answered from here.
func (c *eligibilityAnswers) get(site *flexv1.Site, assets []*flexv1.Asset, rules uint64) encodedJSON {
	if !versioned(site, assets) {
		return nil
	}
	c.mu.RLock()
	e := c.entries[site.UID]
	c.mu.RUnlock()
	if e == nil || !e.matches(site, assets, rules) {
		return nil
	}
	return e.body
}

// put keeps body as the answer for these inputs, in place of the site's previous one.
func (c *eligibilityAnswers) put(site *flexv1.Site, assets []*flexv1.Asset, rules uint64, body []byte) {
	if !versioned(site, assets) || c.max <= 0 {
		return
	}
	e := &eligibilityAnswer{siteVersion: site.ResourceVersion, rules: rules,
		assets: make([]objectVersion, len(assets)), body: encodedJSON(body)}
	for i, a := range assets {
		e.assets[i] = objectVersion{uid: a.UID, version: a.ResourceVersion}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, replacing := c.entries[site.UID]; !replacing && len(c.entries) >= c.max {
		for uid := range c.entries { // an arbitrary one makes room
			delete(c.entries, uid)
			break
		}
	}
	c.entries[site.UID] = e
}

func versioned(site *flexv1.Site, assets []*flexv1.Asset) bool {
	if site.UID == "" || site.ResourceVersion == "" {
		return false
	}
	for _, a := range assets {
		if a.UID == "" || a.ResourceVersion == "" {
			return false
		}
	}
	return true
}
