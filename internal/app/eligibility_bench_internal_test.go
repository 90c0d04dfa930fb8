package app

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/keptanswer"
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
		children := make([]*flexv1.Asset, 0, 2)
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
			&flexv1.Site{}: f.sites, &flexv1.Asset{}: f.assets}), changes: &index.Changes{}},
		kept: keptanswer.New(keptanswer.MaxBytes)}
	// The stores tell the kept answers their changes, as followKept has the informers' do.
	for _, store := range []toolscache.Indexer{f.sites, f.assets} {
		tell := keptTell(f.svc.kept)
		if err := store.AddIndexers(toolscache.Indexers{"kept": func(obj any) ([]string, error) {
			tell(obj)
			return nil, nil
		}}); err != nil {
			t.Fatal(err)
		}
	}
	f.svc.kept.Follow()
	// The Site store tells the sites held by id too, as index.FollowKeptSites has the informer's.
	if err := f.sites.AddIndexers(toolscache.Indexers{"kept-sites": func(obj any) ([]string, error) {
		if s, ok := obj.(*flexv1.Site); ok {
			f.svc.reads.sites.Changed(s.Namespace, s.Labels[flexv1.IDLabel])
		}
		return nil, nil
	}}); err != nil {
		t.Fatal(err)
	}
	f.svc.reads.sites.Follow()
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

// fresh is site-0's answer encoded afresh from its status, as the read encodes a miss.
func (f *eligibilityFixture) fresh(t *testing.T) EncodedJSON {
	t.Helper()
	obj, ok, err := f.sites.GetByKey("org/site-0")
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	site := obj.(*flexv1.Site)
	res, _ := household.EvaluatedEligibility(site)
	enc, err := EncodeEligibility(eligibilityRecord(site.Labels[flexv1.IDLabel], *res))
	if err != nil {
		t.Fatal(err)
	}
	return enc
}

// The kept eligibility answer is the answer encoded afresh, and is served only while the
// site (its resourceVersion), its assets and the catalogue are those it was found current
// against: a new status is answered at once, an asset the status has yet to count makes the
// read wait for the controller as without the kept answer, and the answer of one
// organisation's site is never another's.
func TestKeptEligibilityIsTheFreshAnswerUntilTheSiteChanges(t *testing.T) {
	f := newEligibilityFixture(t, 2)
	ctx := t.Context()
	read := func(p *auth.Principal, id string) (EncodedJSON, error) { return f.svc.EligibilityJSON(ctx, p, id) }
	first, err := read(benchOrg, "id-0")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, f.fresh(t)) {
		t.Fatalf("first read\n%s\nfresh\n%s", first, f.fresh(t))
	}
	again, err := read(benchOrg, "id-0")
	if err != nil || !bytes.Equal(again, first) || &again[0] != &first[0] {
		t.Fatalf("second read not the kept answer: %s %v", again, err)
	}

	// A new status (the consent withdrawn and evaluated again): a new resourceVersion.
	obj, _, _ := f.sites.GetByKey("org/site-0")
	site := obj.(*flexv1.Site).DeepCopy()
	site.Spec.BoundaryMeterConsentAt = nil
	site.Generation, site.ResourceVersion = 2, "2"
	children, _ := f.svc.reads.assetsOf(site)
	f.evaluate(site, children)
	if err := f.sites.Update(site); err != nil {
		t.Fatal(err)
	}
	changed, err := read(benchOrg, "id-0")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(changed, first) || !bytes.Equal(changed, f.fresh(t)) {
		t.Fatalf("after the site changed\n%s\nfresh\n%s", changed, f.fresh(t))
	}

	// A changed asset the status has yet to count: not current, whatever was kept.
	obj, _, _ = f.assets.GetByKey("org/site-0-charger")
	asset := obj.(*flexv1.Asset).DeepCopy()
	asset.Generation, asset.ResourceVersion = 2, "3"
	if err := f.assets.Update(asset); err != nil {
		t.Fatal(err)
	}
	if _, res, body, err := f.svc.evaluatedEligibility(ctx, benchOrg, "id-0", true); err != nil || res != nil || body != nil {
		t.Fatalf("a status behind its assets was served: %v %s %v", res, body, err)
	}

	// Another organisation's site of the same name and id is its own answer.
	other := &auth.Principal{Kind: auth.KindOrganisation, Namespace: "other"}
	obj, _, _ = f.sites.GetByKey("org/site-1")
	theirs := obj.(*flexv1.Site).DeepCopy()
	theirs.Namespace, theirs.UID = "other", "uid-other-site-1"
	theirs.Spec.BoundaryMeterConsentAt = nil
	f.evaluate(theirs, nil)
	if err := f.sites.Add(theirs); err != nil {
		t.Fatal(err)
	}
	mine, err := read(benchOrg, "id-1")
	if err != nil {
		t.Fatal(err)
	}
	got, err := read(other, "id-1")
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(got, mine) {
		t.Fatalf("the other organisation was answered this one's site: %s", got)
	}
	if _, err := read(&auth.Principal{Kind: auth.KindEndUser, Namespace: "org", SiteName: "site-0"}, "id-1"); err == nil {
		t.Fatal("an end user read a site not its own")
	}
}

// A kept answer costs the read no lookup and no allocation (held by the site's id while the
// site and its assets are unchanged), where an answer encoded afresh takes 30 and more.
func TestKeptEligibilityReadAllocations(t *testing.T) {
	f := newEligibilityFixture(t, 100)
	ctx := t.Context()
	if _, err := f.svc.EligibilityJSON(ctx, benchOrg, "id-7"); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		if _, err := f.svc.EligibilityJSON(ctx, benchOrg, "id-7"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 0 {
		t.Fatalf("%.0f allocations a kept read", allocs)
	}
}
