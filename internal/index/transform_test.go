package index

import (
	"reflect"
	"testing"
	"time"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
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

// A Site's in-flight marker leaves the cached copy once the site has been evaluated, when it
// binds nothing any more (household.MarkerOf); before, the cache keeps it. Other annotations
// stay.
func TestCompactForCacheDropsSpentInFlightMarker(t *testing.T) {
	marked := func(observed int64, others map[string]string) *flexv1.Site {
		s := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "org", Annotations: map[string]string{}},
			Status: flexv1.SiteStatus{ObservedGeneration: observed}}
		for k, v := range others {
			s.Annotations[k] = v
		}
		household.InFlight{Until: time.Now().Add(time.Minute), Assets: []string{"a"}}.Mark(s)
		return s
	}
	now := time.Now()
	for _, observed := range []int64{0, -1} { // created; read by the controller, still being written
		fresh, _ := compactForCache(marked(observed, nil))
		if _, ok := household.MarkerOf(fresh.(*flexv1.Site), now); !ok {
			t.Errorf("the marker of a site not evaluated yet (observedGeneration %d) left the cache", observed)
		}
	}
	for _, tc := range []struct {
		others map[string]string
		want   map[string]string
	}{
		{nil, nil},
		{map[string]string{flexv1.AllowedOriginsAnnotation: "https://a.example"},
			map[string]string{flexv1.AllowedOriginsAnnotation: "https://a.example"}},
	} {
		site := marked(1, tc.others)
		got, _ := compactForCache(site)
		if a := got.(*flexv1.Site).Annotations; !reflect.DeepEqual(a, tc.want) {
			t.Errorf("the evaluated site's annotations in the cache: got %v, want %v", a, tc.want)
		}
	}
}

// Owner references keep their values; their API version, kind and flags are shared.
func TestCompactForCacheSharesOwnerReferences(t *testing.T) {
	child := func(name string) *flexv1.Asset {
		return &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "org",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: flexv1.GroupVersion.String(), Kind: "Site", Name: "s",
				UID: "u", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(false)}}}}
	}
	want := child("a")
	got, err := compactForCache(child("a"))
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("compactForCache changed the asset: %v\n got %+v\nwant %+v", err, got, want)
	}
	other, _ := compactForCache(child("b"))
	a, b := got.(*flexv1.Asset).OwnerReferences[0], other.(*flexv1.Asset).OwnerReferences[0]
	if a.Controller != b.Controller || a.BlockOwnerDeletion != b.BlockOwnerDeletion {
		t.Error("the owner references' flags are not shared")
	}
	if unsafe.StringData(a.APIVersion) != unsafe.StringData(b.APIVersion) || unsafe.StringData(a.Kind) != unsafe.StringData(b.Kind) {
		t.Error("the owner references' API version and kind are not shared")
	}
}
