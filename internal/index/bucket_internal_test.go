package index

import (
	"fmt"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

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
	for _, c := range []struct {
		name, field, ns, value string
		want                   []string
	}{
		{"a site by id", ID, "org-a", "id-7", []string{"org-a/site-7"}},
		{"a site by MPAN", MPAN, "org-b", fmt.Sprintf("%013d", 42), []string{"org-b/site-42"}},
		{"an id of another organisation only", ID, "org-b", fmt.Sprintf("id-%d", n-1), nil},
		{"an id nobody has", ID, "org-a", "id-none", nil},
		{"a site by id across organisations", ID, "", "id-3", []string{"org-a/site-3", "org-b/site-3"}},
		{"no end user id is indexed when empty", ExternalUserID, "org-a", "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := FindIn(store, &flexv1.Site{}, c.field, c.ns, c.value)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(names(got), c.want) {
				t.Errorf("found %v, want %v", names(got), c.want)
			}
		})
	}
	// A bucket holds a few of a namespace's sites, not all of them.
	keys := store.ListIndexFuncValues(BucketIndexName(ID))
	if len(keys) < bucketCount {
		t.Errorf("%d buckets in use for %d sites, want all %d", len(keys), n, bucketCount)
	}
	if _, err := FindIn(store, &flexv1.Site{}, AssetModel, "org-a", "site-1"); err == nil {
		t.Error("a field that is not bucketed must be refused, not answered empty")
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
	got, err := FindIn(store, &flexv1.Asset{}, SiteName, "org", "site-17")
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
}

// Every kind with a bucketed index has its list kind both ways (List and the wrappers that
// find for Lookup depend on it).
func TestListForEveryBucketedKind(t *testing.T) {
	for _, k := range uniqueKeys {
		list := ListFor(k.obj)
		if list == nil {
			t.Fatalf("no list kind for %T", k.obj)
		}
		if item := itemOf(list); fmt.Sprintf("%T", item) != fmt.Sprintf("%T", k.obj) {
			t.Errorf("%T lists as %T, whose items are %T", k.obj, list, item)
		}
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
	for value, want := range map[string][]string{"hash-10": {"org-3/conn-10"}, "hash-11": nil, "": nil, "hash-none": nil} {
		got, err := FindIn(store, &flexv1.DeviceConnection{}, OAuthState, "", value)
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
