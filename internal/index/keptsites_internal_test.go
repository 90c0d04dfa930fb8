package index

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// keptSitesFixture is a Site store that tells k its changes, as FollowKeptSites has the
// informer's store do, and the lookup the reads make of it.
type keptSitesFixture struct {
	store  toolscache.Indexer
	lookup Lookup
	k      *KeptSites
	looks  int
}

func newKeptSitesFixture(t testing.TB, n int) *keptSitesFixture {
	t.Helper()
	f := &keptSitesFixture{store: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, BucketIndexers(&flexv1.Site{})),
		k: &KeptSites{}}
	f.lookup = NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Site{}: f.store})
	if err := f.store.AddIndexers(toolscache.Indexers{"tell": func(obj any) ([]string, error) {
		f.k.tell(obj)
		return nil, nil
	}}); err != nil {
		t.Fatal(err)
	}
	f.k.Follow()
	for i := range n {
		if err := f.store.Add(keptTestSite(i, fmt.Sprintf("id-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func keptTestSite(i int, id string) *flexv1.Site {
	return &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: fmt.Sprintf("site-%d", i),
		Labels: map[string]string{flexv1.IDLabel: id}}}
}

// site is the read's lookup through k: the live site with that id.
func (f *keptSitesFixture) site(t testing.TB, ns, id string) *flexv1.Site {
	t.Helper()
	site, err := f.k.Site(ns, id, func() (*flexv1.Site, error) {
		f.looks++
		sites, err := f.lookup.SitesByID(context.Background(), ns, id)
		for _, s := range sites {
			if s.DeletionTimestamp.IsZero() {
				return s, err
			}
		}
		return nil, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return site
}

// A site found by id is held until a change of a site with that id: each change (a new
// version, a deletion begun, the id moved to another site, the object gone) is seen by the
// next read, as the lookup sees it.
func TestKeptSitesSeeEveryChange(t *testing.T) {
	f := newKeptSitesFixture(t, 3)
	first := f.site(t, "org", "id-1")
	if first == nil || first.Name != "site-1" || f.site(t, "org", "id-1") != first || f.looks != 1 {
		t.Fatalf("held %v after %d lookups", first, f.looks)
	}
	if f.site(t, "other", "id-1") != nil || f.site(t, "org", "id-9") != nil || f.k.Len() != 1 {
		t.Fatal("a site of another namespace, or an unknown id, was answered or held")
	}

	updated := keptTestSite(1, "id-1")
	updated.ResourceVersion = "2"
	if err := f.store.Update(updated); err != nil {
		t.Fatal(err)
	}
	if got := f.site(t, "org", "id-1"); got != updated {
		t.Fatalf("after an update, read %v", got)
	}

	deleting := keptTestSite(1, "id-1")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)}
	if err := f.store.Update(deleting); err != nil {
		t.Fatal(err)
	}
	if got := f.site(t, "org", "id-1"); got != nil {
		t.Fatalf("a site being deleted was read: %v", got)
	}

	if err := f.store.Add(keptTestSite(2, "id-1")); err != nil { // site-2 takes id-1 over
		t.Fatal(err)
	}
	if got := f.site(t, "org", "id-1"); got == nil || got.Name != "site-2" {
		t.Fatalf("after site-2 took the id, read %v", got)
	}
	if got := f.site(t, "org", "id-2"); got != nil {
		t.Fatalf("site-2's old id still read %v", got)
	}

	if err := f.store.Delete(keptTestSite(2, "id-1")); err != nil {
		t.Fatal(err)
	}
	if got := f.site(t, "org", "id-1"); got != nil {
		t.Fatalf("a deleted site was read: %v", got)
	}
}

// A lookup that began before a change is not held: the next read looks again.
func TestKeptSitesHoldNothingFoundBeforeAChange(t *testing.T) {
	f := newKeptSitesFixture(t, 1)
	site, err := f.k.Site("org", "id-0", func() (*flexv1.Site, error) {
		obj, _, _ := f.store.GetByKey("org/site-0")
		f.k.Changed("org", "id-0") // the store changes it while the read holds the old object
		return obj.(*flexv1.Site), nil
	})
	if err != nil || site == nil {
		t.Fatal(site, err)
	}
	if f.k.Len() != 0 {
		t.Fatal("a site found before a change was held")
	}
	// Unfollowed, nothing is held.
	var unfollowed KeptSites
	for range 2 {
		if _, err := unfollowed.Site("org", "id-0", func() (*flexv1.Site, error) { return site, nil }); err != nil {
			t.Fatal(err)
		}
	}
	if unfollowed.Len() != 0 {
		t.Fatal("held while unfollowed")
	}
}

// A held site costs the read no allocation, where the store's lookup allocates its matches.
func TestKeptSitesReadAllocations(t *testing.T) {
	f := newKeptSitesFixture(t, 100)
	f.site(t, "org", "id-7")
	if allocs := testing.AllocsPerRun(100, func() { f.site(t, "org", "id-7") }); allocs > 0 {
		t.Fatalf("%.0f allocations a held read", allocs)
	}
}

// Compare with BenchmarkLookupInStores: `go test ./internal/index/ -run X -bench KeptSites -benchmem`.
func BenchmarkKeptSites(b *testing.B) {
	const n = 1000
	f := newKeptSitesFixture(b, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if f.site(b, "org", ids[i%n]) == nil {
			b.Fatal("not found")
		}
		i++
	}
}
