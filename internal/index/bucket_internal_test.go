package index

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Find in a store holding many sites across namespaces: exactly the sites whose key is the
// value, in the namespace asked (or any, for a Site by ID), whatever shares their bucket.
func TestFindInBuckets(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, BucketIndexers(&flexv1.Site{}))
	site := func(ns string, i int) *flexv1.Site {
		return &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("site-%d", i),
			Labels: map[string]string{flexv1.IDLabel: fmt.Sprintf("id-%d", i)}},
			Spec: flexv1.SiteSpec{MPAN: fmt.Sprintf("%013d", i)}}
	}
	const n = 5 * bucketCount // every bucket shared by several sites
	for i := range n {
		if err := store.Add(site("org-a", i)); err != nil {
			t.Fatal(err)
		}
	}
	// The same ids and MPANs in another organisation, for half of them.
	for i := range n / 2 {
		if err := store.Add(site("org-b", i)); err != nil {
			t.Fatal(err)
		}
	}
	names := func(sites []*flexv1.Site) []string {
		out := make([]string, 0, len(sites))
		for _, s := range sites {
			out = append(out, s.Namespace+"/"+s.Name)
		}
		slices.Sort(out)
		return out
	}
	lookup := NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Site{}: store})
	for _, c := range []struct {
		name      string
		find      func(ctx context.Context, ns, value string) ([]*flexv1.Site, error)
		ns, value string
		want      []string
	}{
		{"a site by id", lookup.SitesByID, "org-a", "id-7", []string{"org-a/site-7"}},
		{"a site by MPAN", lookup.SitesByMPAN, "org-b", fmt.Sprintf("%013d", 42), []string{"org-b/site-42"}},
		{"an id of another organisation only", lookup.SitesByID, "org-b", fmt.Sprintf("id-%d", n-1), nil},
		{"an id nobody has", lookup.SitesByID, "org-a", "id-none", nil},
		{"a site by id across organisations", lookup.SitesByID, "", "id-3", []string{"org-a/site-3", "org-b/site-3"}},
		{"no end user id is indexed when empty", lookup.SitesByExternalUserID, "org-a", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := c.find(t.Context(), c.ns, c.value)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), c.want) {
				t.Errorf("found %v, want %v", names(got), c.want)
			}
		})
	}
	// A bucket holds a few of a namespace's sites, not all of them.
	keys := store.ListIndexFuncValues(BucketIndexName(mpanKey))
	if len(keys) < bucketCount {
		t.Errorf("%d buckets in use for %d sites, want all %d", len(keys), n, bucketCount)
	}
	// A site's id, a key of the hot reads, is kept by value within a namespace (what a lookup
	// there reads is the site alone, at any size) and by bucket across namespaces.
	if got, _ := store.ByIndex(BucketIndexName(idKey), NamespacedKey("org-a", "id-7")); len(got) != 1 {
		t.Errorf("the index of ids in org-a holds %d sites under id-7, want that site alone", len(got))
	}
	across := 0
	for _, k := range store.ListIndexFuncValues(BucketIndexName(idKey)) {
		if strings.HasPrefix(k, allNamespaces+"/") {
			across++
		}
	}
	if across > bucketCount {
		t.Errorf("%d keys of ids across namespaces for %d sites, want at most the %d buckets", across, n, bucketCount)
	}
	if _, err := lookup.SitesByMPAN(t.Context(), "", "0000000000001"); err == nil {
		t.Error("a key found within a namespace must refuse every namespace, not answer empty")
	}
}

// A site's children by its name: every child of that site, none of another site in the same
// bucket.
func TestFindChildrenBySiteName(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, BucketIndexers(&flexv1.Asset{}))
	for i := range 3 * bucketCount {
		for _, kind := range []string{"charger", "battery"} {
			a := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: fmt.Sprintf("asset-%s-%d", kind, i)},
				Spec: flexv1.AssetSpec{SiteName: fmt.Sprintf("site-%d", i)}}
			if err := store.Add(a); err != nil {
				t.Fatal(err)
			}
		}
	}
	lookup := NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Asset{}: store})
	got, err := lookup.AssetsOfSite(t.Context(), "org", "site-17")
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(got))
	for _, a := range got {
		names = append(names, a.Name)
	}
	slices.Sort(names)
	if want := []string{"asset-battery-17", "asset-charger-17"}; !slices.Equal(names, want) {
		t.Errorf("children %v, want %v", names, want)
	}
	// A site's assets are read on every eligibility read: kept by the site's name itself, so
	// the lookup reads those two assets and no other site's, at any size.
	if got, _ := store.ByIndex(BucketIndexName(siteNameKey), NamespacedKey("org", "site-17")); len(got) != 2 {
		t.Errorf("the index of sites' assets holds %d assets under site-17, want its two", len(got))
	}
}

// A DeviceConnection is found by its state's hash across organisations (the OAuth callback
// carries no token), and one without an authorisation in progress is not indexed at all.
func TestFindConnectionByOAuthState(t *testing.T) {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, BucketIndexers(&flexv1.DeviceConnection{}))
	for i := range 3 * bucketCount {
		conn := &flexv1.DeviceConnection{ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("org-%d", i%7),
			Name: fmt.Sprintf("conn-%d", i)}, Spec: flexv1.DeviceConnectionSpec{SiteName: fmt.Sprintf("site-%d", i)}}
		if i%2 == 0 {
			conn.Annotations = map[string]string{flexv1.OAuthStateAnnotation: fmt.Sprintf("hash-%d", i)}
		}
		if err := store.Add(conn); err != nil {
			t.Fatal(err)
		}
	}
	lookup := NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.DeviceConnection{}: store})
	for value, want := range map[string][]string{"hash-10": {"org-3/conn-10"}, "hash-11": nil, "": nil, "hash-none": nil} {
		got, err := lookup.DeviceConnectionsByOAuthState(t.Context(), value)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, c := range got {
			names = append(names, c.Namespace+"/"+c.Name)
		}
		if !slices.Equal(names, want) {
			t.Errorf("%q: found %v, want %v", value, names, want)
		}
	}
}
