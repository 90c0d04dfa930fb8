package app

import (
	"context"
	"slices"
	"strings"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/types"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/metrics"
)

// readIndexes look cached Sites and Assets up by their field indexes straight in the
// informers' indexers, for the two hot reads (eligibility, transactions): a List through the
// cache copies every match into a new list by reflection, which was a fifth of such a read's
// CPU and most of its garbage. What they return are the cached objects themselves, shared:
// read-only, like any UnsafeDisableDeepCopy read.
type readIndexes struct {
	lookup index.Lookup
	// answers keeps encoded eligibility answers by what they were computed from
	// (below).
	answers *eligibilityAnswers
}

// newReadIndexes finds the indexers of the cache's Site and Asset informers (nil when the
// cache is not informer-backed: reads then List as before).
func newReadIndexes(c client.Reader) *readIndexes {
	sites, assets := index.StoreOf(c, &flexv1.Site{}), index.StoreOf(c, &flexv1.Asset{})
	if sites == nil || assets == nil {
		return nil
	}
	return &readIndexes{lookup: index.NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Site{}: sites, &flexv1.Asset{}: assets}),
		answers: newEligibilityAnswers(maxEligibilityAnswerBytes)}
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
// leaves them out, as Evaluate does), in UID order: the indexer gives them in its set's
// random order, and a kept eligibility answer matches its assets in order (with two assets,
// every other read missed its kept answer and evaluated again).
func (ri *readIndexes) assetsOf(site *flexv1.Site) ([]*flexv1.Asset, error) {
	out, err := ri.lookup.AssetsOfSite(context.Background(), site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	slices.SortFunc(out, func(a, b *flexv1.Asset) int { return strings.Compare(string(a.UID), string(b.UID)) })
	return out, nil
}

// EncodedJSON is an answer already encoded as encoding/json's Encoder would (HTML-safe, a
// trailing newline): a door sends it as it is.
type EncodedJSON []byte

// maxEligibilityAnswerBytes bounds eligibilityAnswers by the memory its answers take
// (answerCost): 32 MiB, about 27,000 answers of two assets (1,008 bytes each), so a fleet
// of tens of thousands of sites read in turn is answered from here. A bound by count (8,192
// before) was smaller than the bench's 10,000 sites read cyclically, and every evaluation
// a miss costs is mostly garbage to collect. Past the bound, arbitrary answers make room
// (the next read of their site evaluates again). flexsite_eligibility_kept_answer_bytes
// shows what is held.
const maxEligibilityAnswerBytes = 32 << 20

// answerBookkeeping is what an answer costs beside its body: the entry, its asset versions'
// slice and the map slot, rounded up.
const answerBookkeeping = 256

// eligibilityAnswers keeps the last encoded GET eligibility answer of each site read, with
// what it was computed from: the Site's and every Asset's resourceVersion (in the order the
// index gave them) and the catalogue's version (householdstore.Catalogue.VersionedRules). The
// answer is a pure function of those (household.EvaluateAssets), so a kept answer is served
// only while every one of them is unchanged: any write to the site or an asset, an asset
// added or removed, or a catalogue event, and the next read evaluates afresh. Nothing is
// staler than the cache the evaluation itself would read.
type eligibilityAnswers struct {
	mu      sync.RWMutex
	entries map[types.UID]*eligibilityAnswer
	// bytes is the answerCost of every entry; maxBytes its bound.
	bytes, maxBytes int
}

// eligibilityAnswer is one site's kept answer and its inputs' versions.
type eligibilityAnswer struct {
	siteVersion string
	rules       uint64
	assets      []objectVersion
	body        EncodedJSON
}

type objectVersion struct {
	uid     types.UID
	version string
}

func newEligibilityAnswers(maxBytes int) *eligibilityAnswers {
	return &eligibilityAnswers{entries: map[types.UID]*eligibilityAnswer{}, maxBytes: maxBytes}
}

// answerCost is the memory an answer is counted for: its body, its assets' versions and
// answerBookkeeping.
func answerCost(e *eligibilityAnswer) int {
	n := len(e.body) + len(e.siteVersion) + answerBookkeeping
	for _, a := range e.assets {
		n += len(a.uid) + len(a.version) + int(unsafe.Sizeof(objectVersion{}))
	}
	return n
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
func (c *eligibilityAnswers) get(site *flexv1.Site, assets []*flexv1.Asset, rules uint64) EncodedJSON {
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

// put keeps body as the answer for these inputs, in place of the site's previous one. An
// answer larger than the whole bound is not kept.
func (c *eligibilityAnswers) put(site *flexv1.Site, assets []*flexv1.Asset, rules uint64, body []byte) {
	if !versioned(site, assets) {
		return
	}
	e := &eligibilityAnswer{siteVersion: site.ResourceVersion, rules: rules,
		assets: make([]objectVersion, len(assets)), body: EncodedJSON(body)}
	for i, a := range assets {
		e.assets[i] = objectVersion{uid: a.UID, version: a.ResourceVersion}
	}
	cost := answerCost(e)
	if cost > c.maxBytes {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, replacing := c.entries[site.UID]; replacing {
		c.bytes -= answerCost(old)
		delete(c.entries, site.UID)
	}
	for uid, old := range c.entries { // arbitrary ones make room
		if c.bytes+cost <= c.maxBytes {
			break
		}
		c.bytes -= answerCost(old)
		delete(c.entries, uid)
	}
	c.entries[site.UID] = e
	c.bytes += cost
	metrics.KeptEligibilityAnswerBytes.Set(float64(c.bytes))
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

// rulesToRead are the rules in force for an answer that only reads (GET eligibility): from
// the householdstore.Catalogue kept up to date by the cache's informers, without listing the
// catalogue per request, when the cache has informers; else listed (householdstore.LoadRules).
func (s *Service) rulesToRead(ctx context.Context) (eligibility.Rules, error) {
	if s.catalogue != nil {
		return s.catalogue.Rules(ctx)
	}
	return householdstore.LoadRules(ctx, s.Cache)
}
