package index

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A site by id and its assets in a namespace of 10,000 sites with two assets each, straight
// from the stores (the eligibility read's lookups): compare with `go test -bench Lookup`.
func BenchmarkLookupInStores(b *testing.B) {
	sites := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, BucketIndexers(&flexv1.Site{}))
	assets := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, BucketIndexers(&flexv1.Asset{}))
	const n = 10000
	for i := range n {
		name := fmt.Sprintf("site-%d", i)
		if err := sites.Add(&flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: name,
			Labels: map[string]string{flexv1.IDLabel: fmt.Sprintf("id-%d", i)}}}); err != nil {
			b.Fatal(err)
		}
		for _, kind := range []string{"charger", "battery"} {
			if err := assets.Add(&flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: name + "-" + kind},
				Spec: flexv1.AssetSpec{SiteName: name}}); err != nil {
				b.Fatal(err)
			}
		}
	}
	l := NewStoreLookup(map[client.Object]toolscache.Indexer{&flexv1.Site{}: sites, &flexv1.Asset{}: assets})
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		found, err := l.SitesByID(b.Context(), "org", fmt.Sprintf("id-%d", i%n))
		if err != nil || len(found) != 1 {
			b.Fatal(found, err)
		}
		children, err := l.AssetsOfSite(b.Context(), "org", found[0].Name)
		if err != nil || len(children) != 2 {
			b.Fatal(children, err)
		}
	}
}
