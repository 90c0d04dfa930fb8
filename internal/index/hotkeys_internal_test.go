package index

import (
	"fmt"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// assetStore is a namespace of n sites with a charger and a battery each, in an informer's
// store with the cache's indexes, and the batteries' API ids.
func assetStore(t *testing.T, n int) (toolscache.Indexer, []string) {
	t.Helper()
	assets := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, BucketIndexers(&flexv1.Asset{}))
	var batteries []string
	for i := range n {
		site := fmt.Sprintf("site-%d", i)
		for k, kind := range []flexv1.AssetType{flexv1.AssetTypeCharger, flexv1.AssetTypeBattery} {
			id := fmt.Sprintf("%08x-0000-4000-8000-%012d", i, k)
			if err := assets.Add(&flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: site + "-" + string(kind),
				Labels: map[string]string{flexv1.IDLabel: id}}, Spec: flexv1.AssetSpec{SiteName: site, Type: kind}}); err != nil {
				t.Fatal(err)
			}
			if kind == flexv1.AssetTypeBattery {
				batteries = append(batteries, id)
			}
		}
	}
	return assets, batteries
}

// bytesPerLookup is what finding each of ids by API id allocates, on average.
func bytesPerLookup(t *testing.T, l Lookup, ids []string) float64 {
	t.Helper()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for _, id := range ids {
		found, err := l.AssetsByID(t.Context(), "org", id)
		if err != nil || len(found) != 1 {
			t.Fatalf("asset %s: %v %v", id, found, err)
		}
	}
	runtime.ReadMemStats(&after)
	return float64(after.TotalAlloc-before.TotalAlloc) / float64(len(ids))
}

// An asset by its API id is the lookup of every per-asset read (the battery schedule, an
// asset's price curve and intent): it costs the same in a namespace of 10,000 sites as in
// one of 1,000 (the bucketed index handed the read a bucket's objects, ten times as many).
func TestAssetByIDCostsTheSameAtAnyFleetSize(t *testing.T) {
	perLookup := map[int]float64{}
	for _, n := range []int{1000, 10000} {
		assets, batteries := assetStore(t, n)
		l := NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Asset{}: assets})
		bytesPerLookup(t, l, batteries[:100]) // warm
		perLookup[n] = bytesPerLookup(t, l, batteries[:1000])
	}
	if small, large := perLookup[1000], perLookup[10000]; large > small+8 {
		t.Fatalf("an asset by id allocates %.0f bytes among 10,000 sites, %.0f among 1,000", large, small)
	}
}

// A lookup in a store at hand allocates only what it answers and the store's own list: no
// list of the kind (which only a List fills).
func TestStoreLookupAllocations(t *testing.T) {
	assets, batteries := assetStore(t, 100)
	l := NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Asset{}: assets})
	allocs := testing.AllocsPerRun(100, func() {
		if found, err := l.AssetsByID(t.Context(), "org", batteries[7]); err != nil || len(found) != 1 {
			t.Fatal(found, err)
		}
	})
	if allocs > 4 { // the key, the store's list, the answer, and the store's own
		t.Fatalf("%.0f allocations a lookup", allocs)
	}
}
