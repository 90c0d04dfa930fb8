package index

import (
	"maps"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/inflight"
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

	ledger := &flexv1.RewardLedger{ObjectMeta: metav1.ObjectMeta{Name: "l", Namespace: "org"},
		Spec: flexv1.RewardLedgerSpec{SiteName: "s", Transactions: []flexv1.RewardTransaction{{ID: "t"}}}}
	stripped, err := withoutTransactions(ledger)
	if l := stripped.(*flexv1.RewardLedger); err != nil || l.Spec.Transactions != nil || l.Spec.SiteName != "s" {
		t.Errorf("withoutTransactions: %v %+v", err, l.Spec)
	}
}

// The cache forgets the in-flight marker of an evaluated site only; other annotations and a
// marker that still binds stay.
func TestCompactForCacheDropsSettledMarker(t *testing.T) {
	marker := map[string]string{inflight.Annotation: `{"until":"2026-01-01T00:00:00Z"}`}
	cases := []struct {
		name       string
		annotation map[string]string
		observed   int64
		want       map[string]string
	}{
		{"not evaluated yet: kept", marker, 0, marker},
		{"never looked at: kept", marker, -1, marker},
		{"evaluated: dropped with the map", marker, 1, nil},
		{"evaluated, other annotations stay", map[string]string{inflight.Annotation: "{}", "a": "b"}, 2, map[string]string{"a": "b"}},
		{"evaluated, no marker", map[string]string{"a": "b"}, 1, map[string]string{"a": "b"}},
		{"no annotations", nil, 1, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "org", Annotations: maps.Clone(tc.annotation)},
				Status: flexv1.SiteStatus{ObservedGeneration: tc.observed}}
			got, err := compactForCache(site)
			if err != nil || !reflect.DeepEqual(got.(*flexv1.Site).Annotations, tc.want) {
				t.Errorf("annotations %v (%v), want %v", got.(*flexv1.Site).Annotations, err, tc.want)
			}
		})
	}
}
