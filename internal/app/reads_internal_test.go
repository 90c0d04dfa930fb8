package app

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/index"
)

func cachedSite(uid, rv string) *flexv1.Site {
	return &flexv1.Site{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}}
}

func cachedAsset(uid, rv string) *flexv1.Asset {
	return &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid), ResourceVersion: rv}}
}

// A kept eligibility answer is served only for exactly the inputs it was computed from.
func TestEligibilityAnswersKeyedByEveryInput(t *testing.T) {
	kept := func() (*flexv1.Site, []*flexv1.Asset, uint64) {
		return cachedSite("s", "10"), []*flexv1.Asset{cachedAsset("a", "11"), cachedAsset("b", "12")}, 3
	}
	cases := []struct {
		name   string
		change func(s **flexv1.Site, as *[]*flexv1.Asset, rules *uint64)
		hit    bool
	}{
		{"same inputs", func(**flexv1.Site, *[]*flexv1.Asset, *uint64) {}, true},
		{"site written", func(s **flexv1.Site, _ *[]*flexv1.Asset, _ *uint64) { (*s).ResourceVersion = "13" }, false},
		{"another site", func(s **flexv1.Site, _ *[]*flexv1.Asset, _ *uint64) { *s = cachedSite("t", "10") }, false},
		{"asset written", func(_ **flexv1.Site, as *[]*flexv1.Asset, _ *uint64) { (*as)[1] = cachedAsset("b", "14") }, false},
		{"asset replaced", func(_ **flexv1.Site, as *[]*flexv1.Asset, _ *uint64) { (*as)[1] = cachedAsset("c", "12") }, false},
		{"asset removed", func(_ **flexv1.Site, as *[]*flexv1.Asset, _ *uint64) { *as = (*as)[:1] }, false},
		{"asset added", func(_ **flexv1.Site, as *[]*flexv1.Asset, _ *uint64) {
			*as = append(*as, cachedAsset("c", "15"))
		}, false},
		{"assets reordered", func(_ **flexv1.Site, as *[]*flexv1.Asset, _ *uint64) {
			*as = []*flexv1.Asset{(*as)[1], (*as)[0]}
		}, false},
		{"catalogue changed", func(_ **flexv1.Site, _ *[]*flexv1.Asset, rules *uint64) { *rules = 4 }, false},
		{"unversioned site", func(s **flexv1.Site, _ *[]*flexv1.Asset, _ *uint64) { (*s).ResourceVersion = "" }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newEligibilityAnswers(1 << 20)
			site, assets, rules := kept()
			c.put(site, assets, rules, []byte("kept\n"))
			site, assets, rules = kept()
			tc.change(&site, &assets, &rules)
			got := c.get(site, assets, rules)
			if hit := got != nil; hit != tc.hit {
				t.Fatalf("hit = %v, want %v", hit, tc.hit)
			}
			if tc.hit && string(got) != "kept\n" {
				t.Fatalf("got %q", got)
			}
		})
	}
}

// A new answer replaces the site's previous one; the memory kept never passes the bound, and
// the count follows every put and replacement.
func TestEligibilityAnswersBounded(t *testing.T) {
	one := answerCost(&eligibilityAnswer{siteVersion: "a", body: []byte("x")})
	c := newEligibilityAnswers(3 * one)
	for rv := range 5 {
		c.put(cachedSite("s", string(rune('a'+rv))), nil, 1, []byte("x"))
	}
	if len(c.entries) != 1 || c.bytes != one {
		t.Fatalf("%d answers (%d bytes) kept for one site, want 1 (%d bytes)", len(c.entries), c.bytes, one)
	}
	for _, uid := range []string{"t", "u", "v", "w", "x"} {
		c.put(cachedSite(uid, "1"), nil, 1, []byte("x"))
		if len(c.entries) > 3 || c.bytes > c.maxBytes {
			t.Fatalf("%d answers, %d bytes kept, bound %d bytes", len(c.entries), c.bytes, c.maxBytes)
		}
	}
	if c.get(cachedSite("x", "1"), nil, 1) == nil {
		t.Fatal("the answer just kept is not served")
	}
	sum := 0
	for _, e := range c.entries {
		sum += answerCost(e)
	}
	if sum != c.bytes {
		t.Fatalf("counted %d bytes, the entries cost %d", c.bytes, sum)
	}
	// One answer larger than the others makes room for itself; one larger than the whole
	// bound is not kept.
	c.put(cachedSite("big", "1"), nil, 1, make([]byte, 2*one-answerBookkeeping))
	if c.get(cachedSite("big", "1"), nil, 1) == nil || c.bytes > c.maxBytes {
		t.Fatalf("a larger answer: kept %v, %d bytes of %d", c.get(cachedSite("big", "1"), nil, 1) != nil, c.bytes, c.maxBytes)
	}
	c.put(cachedSite("huge", "1"), nil, 1, make([]byte, 3*one))
	if c.get(cachedSite("huge", "1"), nil, 1) != nil {
		t.Fatal("an answer larger than the bound was kept")
	}
	unversioned := newEligibilityAnswers(3 * one)
	unversioned.put(cachedSite("s", "1"), []*flexv1.Asset{cachedAsset("a", "")}, 1, []byte("x"))
	if len(unversioned.entries) != 0 {
		t.Fatal("an answer from an asset without a resourceVersion was kept")
	}
}

// The informer's index gives a site's assets in its set's random order; assetsOf puts them in
// UID order, so a kept answer (matched in order) is found on every read of a site with
// several assets, not on every other one.
func TestKeptAnswerFoundWhateverTheIndexOrder(t *testing.T) {
	assets := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, index.BucketIndexers(&flexv1.Asset{}))
	site := cachedSite("site-uid", "7")
	site.Namespace, site.Name = "org", "mpan-1"
	for _, uid := range []string{"c", "a", "d", "b"} {
		a := cachedAsset(uid, "1")
		a.Namespace, a.Name, a.Spec.SiteName = "org", "asset-"+uid, site.Name
		if err := assets.Add(a); err != nil {
			t.Fatal(err)
		}
	}
	ri := &readIndexes{lookup: index.NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Asset{}: assets}), answers: newEligibilityAnswers(1 << 20)}
	first, err := ri.assetsOf(site)
	if err != nil {
		t.Fatal(err)
	}
	ri.answers.put(site, first, 1, []byte("{}\n"))
	for range 50 {
		again, err := ri.assetsOf(site)
		if err != nil {
			t.Fatal(err)
		}
		if ri.answers.get(site, again, 1) == nil {
			t.Fatalf("kept answer missed with assets in order %v", uids(again))
		}
	}
}

func uids(assets []*flexv1.Asset) []types.UID {
	out := make([]types.UID, len(assets))
	for i, a := range assets {
		out[i] = a.UID
	}
	return out
}
