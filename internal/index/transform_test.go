package index

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// The cache transform changes no value: it drops managedFields (and a ledger's
// transactions) and shares repeated texts.
func TestCompactForCacheKeepsValues(t *testing.T) {
	site := &flexv1.Site{
		ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "org", Finalizers: []string{flexv1.Finalizer},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Status: flexv1.SiteStatus{
			Conditions:           []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Succeeded", Message: "ok"}},
			EligiblePropositions: []flexv1.PropositionName{flexv1.PropositionLimitedPause},
			Assets: []flexv1.AssetEligibility{{Name: "a", Propositions: []flexv1.PropositionEligibility{
				{Proposition: flexv1.PropositionLimitedPause, Issues: []flexv1.EligibilityIssue{"x", "y"}}}}},
		},
	}
	want := site.DeepCopy()
	want.ManagedFields = nil
	got, err := compactForCache(site.DeepCopy())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("compactForCache changed the site: %v\n got %+v\nwant %+v", err, got, want)
	}
	// Two sites with the same issues share one list.
	other, _ := compactForCache(site.DeepCopy())
	a := got.(*flexv1.Site).Status.Assets[0].Propositions[0].Issues
	b := other.(*flexv1.Site).Status.Assets[0].Propositions[0].Issues
	if &a[0] != &b[0] {
		t.Error("equal issue lists are not shared")
	}

	first := metav1.Now()
	ledger := &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "org", Generation: 2},
		Spec: flexv1.RewardLedgerSpec{SiteName: "s", Transactions: []flexv1.RewardTransaction{{ID: "t"}}},
		Status: flexv1.RewardLedgerStatus{ObservedGeneration: 2, BalancePence: ptr.To[int64](5), TotalEarnedPence: ptr.To[int64](7),
			FirstRewardedAt: &first, HistoryRevision: ptr.To[int64](3), TransactionCount: ptr.To[int64](2), LastCredited: &first,
			Conditions:         []metav1.Condition{{Type: flexv1.IngestedCondition, Status: metav1.ConditionTrue}},
			RecentTransactions: []flexv1.RecentTransaction{{ID: "t"}}}}
	wantLedger := ledger.DeepCopy()
	wantLedger.Spec.Transactions, wantLedger.Status.RecentTransactions, wantLedger.Status.Conditions = nil, nil, nil
	wantLedger.Status.TransactionCount, wantLedger.Status.LastCredited = nil, nil
	stripped, err := withoutTransactions(ledger)
	if err != nil || !reflect.DeepEqual(stripped, wantLedger) {
		t.Errorf("withoutTransactions: %v\n got %+v\nwant %+v", err, stripped.(*flexv1.RewardLedger).Status, wantLedger.Status)
	}
}

// Owner references keep their values: only their API version, kind and flags are shared.
func TestCompactForCacheKeepsOwnerReferences(t *testing.T) {
	asset := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "org", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: flexv1.GroupVersion.String(), Kind: "Site", Name: "s", UID: "u", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)},
		{APIVersion: "v1", Kind: "ConfigMap", Name: "c", UID: "v"},
	}}}
	want := asset.DeepCopy()
	got, err := compactForCache(asset.DeepCopy())
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("compactForCache changed the owner references: %v\n got %+v\nwant %+v", err, got, want)
	}
	other, _ := compactForCache(want.DeepCopy())
	a, b := got.(*flexv1.Asset).OwnerReferences[0], other.(*flexv1.Asset).OwnerReferences[0]
	if a.Controller != b.Controller || a.BlockOwnerDeletion != b.BlockOwnerDeletion {
		t.Error("the owner references' flags are not shared")
	}
}

// A Site's in-flight marker leaves the cached copy once the site is evaluated (it binds
// nothing then), and stays while it binds.
func TestCompactForCacheDropsOnlySpentMarkers(t *testing.T) {
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "org", Annotations: map[string]string{
		flexv1.InFlightAnnotation: `{"until":"2026-01-01T00:00:00Z"}`, "other": "kept"}}}
	site.Status.ObservedGeneration = -1
	got, _ := compactForCache(site.DeepCopy())
	if _, ok := got.(*flexv1.Site).Annotations[flexv1.InFlightAnnotation]; !ok {
		t.Error("the marker of a site still being written left the cache")
	}
	site.Status.ObservedGeneration = 1
	got, _ = compactForCache(site.DeepCopy())
	if want := map[string]string{"other": "kept"}; !reflect.DeepEqual(got.(*flexv1.Site).Annotations, want) {
		t.Errorf("annotations of an evaluated site: got %v, want %v", got.(*flexv1.Site).Annotations, want)
	}
	delete(site.Annotations, "other")
	got, _ = compactForCache(site.DeepCopy())
	if got.(*flexv1.Site).Annotations != nil {
		t.Errorf("an evaluated site's only annotation, its spent marker, stayed: %v", got.(*flexv1.Site).Annotations)
	}
}
