package app

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/index"
)

// eligibilityFixture is a Service reading n sites of namespace org, each with a charger and a
// battery and its eligibility evaluated into its status as the Site controller writes it,
// from in-memory stores (the informers' indexers): the eligibility read without a cluster.
type eligibilityFixture struct {
	svc    *Service
	sites  toolscache.Indexer
	assets toolscache.Indexer
	rules  eligibility.Rules
}

func newEligibilityFixture(t testing.TB, n int) *eligibilityFixture {
	t.Helper()
	rules := eligibility.NewRules([]flexv1.Proposition{
		{Spec: flexv1.PropositionSpec{Proposition: flexv1.PropositionLimitedPause, BoundaryMeterQualifies: ptr.To(true)}},
		{Spec: flexv1.PropositionSpec{Proposition: flexv1.PropositionFullAssetScheduleControl, RequiresBoundaryMeterConsent: true}},
	}, []flexv1.AssetModel{{ObjectMeta: metav1.ObjectMeta{Name: "zappi"},
		Spec: flexv1.AssetModelSpec{ModelName: "zappi", CoP11Qualified: true}}})
	f := &eligibilityFixture{
		sites:  toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, index.BucketIndexers(&flexv1.Site{})),
		assets: toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, index.BucketIndexers(&flexv1.Asset{})),
		rules:  rules,
	}
	for i := range n {
		name := fmt.Sprintf("site-%d", i)
		var children []*flexv1.Asset
		for _, kind := range []flexv1.AssetType{flexv1.AssetTypeCharger, flexv1.AssetTypeBattery} {
			a := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: name + "-" + string(kind),
				UID: types.UID(fmt.Sprintf("uid-%s-%s", name, kind)), Generation: 1, ResourceVersion: "1",
				Labels: map[string]string{flexv1.IDLabel: fmt.Sprintf("id-%d-%s", i, kind)}},
				Spec: flexv1.AssetSpec{SiteName: name, ExternalID: "ext-" + name + string(kind), Type: kind, Model: "zappi",
					InstallationDate: "2024-01-01"}}
			children = append(children, a)
			if err := f.assets.Add(a); err != nil {
				t.Fatal(err)
			}
		}
		site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: "org", Name: name, Generation: 1,
			UID: types.UID("uid-" + name), ResourceVersion: "1",
			Labels: map[string]string{flexv1.IDLabel: fmt.Sprintf("id-%d", i)}},
			Spec: flexv1.SiteSpec{MPAN: "1200000000011", BoundaryMeterConsentAt: &metav1.Time{Time: time.Unix(1, 0)}}}
		f.evaluate(site, children)
		if err := f.sites.Add(site); err != nil {
			t.Fatal(err)
		}
	}
	f.svc = &Service{Config: Config{Now: time.Now}, catalogue: householdstore.FixedCatalogue(rules),
		reads: &readIndexes{lookup: index.NewStoreLookup(map[client.Object]toolscache.Indexer{
			&flexv1.Site{}: f.sites, &flexv1.Asset{}: f.assets}), changes: &cacheChanges{}},
		kept: newKeptEligibility(maxKeptEligibilityBytes)}
	return f
}

// evaluate writes the site's eligibility into its status, as the Site controller does.
func (f *eligibilityFixture) evaluate(site *flexv1.Site, assets []*flexv1.Asset) {
	res := household.EvaluateAssets(&site.Spec, assets, f.rules)
	site.Status.ObservedGeneration = site.Generation
	site.Status.Conditions = []metav1.Condition{{Type: flexv1.EligibleCondition, ObservedGeneration: site.Generation}}
	site.Status.Properties, site.Status.EligiblePropositions, site.Status.Assets =
		res.Properties, res.EligiblePropositions, res.Assets
	site.Status.EvaluatedFrom = household.EligibilityInputsOf(assets, f.rules)
}

var benchOrg = &auth.Principal{Kind: auth.KindOrganisation, Namespace: "org"}

// The eligibility read's own work (lookups, the currency check, the record and its encoding)
// over 1,000 sites: compare with `go test ./internal/app/ -run X -bench EligibilityRead -benchmem`.
func BenchmarkEligibilityRead(b *testing.B) {
	const n = 1000
	f := newEligibilityFixture(b, n)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("id-%d", i)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		enc, err := f.svc.EligibilityJSON(b.Context(), benchOrg, ids[i%n])
		if err != nil || len(enc) == 0 {
			b.Fatal(enc, err)
		}
		i++
	}
}
