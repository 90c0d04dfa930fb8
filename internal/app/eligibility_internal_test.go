package app

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
)

// The API answers a site's eligibility from the status the Site controller stored, where it
// once evaluated afresh: the answer must be byte for byte what the evaluation gives, after
// the status's round trip through the API server (JSON, empty lists left out), in the
// documented order of assets, propositions and issue codes.
func TestEligibilityServedFromStatusIsTheEvaluation(t *testing.T) {
	rules := eligibility.NewRules([]flexv1.Proposition{
		{Spec: flexv1.PropositionSpec{Proposition: flexv1.PropositionLimitedPause, BoundaryMeterQualifies: ptr.To(true)}},
		{Spec: flexv1.PropositionSpec{Proposition: flexv1.PropositionFullAssetScheduleControl, RequiresBoundaryMeterConsent: true}},
	}, []flexv1.AssetModel{{ObjectMeta: metav1.ObjectMeta{Name: "zappi"},
		Spec: flexv1.AssetModelSpec{ModelName: "zappi", CoP11Qualified: true}}})
	asset := func(name, model, installed string) *flexv1.Asset {
		return &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Generation: 1,
			Labels: map[string]string{flexv1.IDLabel: "id-" + name}},
			Spec: flexv1.AssetSpec{ExternalID: "ext-" + name, Type: flexv1.AssetTypeCharger, Model: model, InstallationDate: installed}}
	}
	for _, tc := range []struct {
		name   string
		spec   flexv1.SiteSpec
		assets []*flexv1.Asset
	}{
		{"eligible and not", flexv1.SiteSpec{MPAN: "1200000000011", BoundaryMeterConsentAt: &metav1.Time{Time: time.Unix(1, 0)}},
			[]*flexv1.Asset{asset("b-charger", "zappi", "2024-01-01"), asset("a-charger", "", "")}},
		{"site issues", flexv1.SiteSpec{NonDomestic: true}, []*flexv1.Asset{asset("charger", "zappi", "2024-01-01")}},
		{"no assets", flexv1.SiteSpec{MPAN: "1200000000011"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fresh := household.EvaluateAssets(&tc.spec, tc.assets, rules)
			// Stored as the Site controller stores it.
			site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "home", Generation: 1,
				Labels: map[string]string{flexv1.IDLabel: "site-id"}}, Spec: tc.spec}
			site.Status.ObservedGeneration = 1
			site.Status.Conditions = []metav1.Condition{{Type: flexv1.EligibleCondition, ObservedGeneration: 1}}
			site.Status.Properties, site.Status.EligiblePropositions, site.Status.Assets =
				fresh.Properties, fresh.EligiblePropositions, fresh.Assets
			site.Status.EvaluatedFrom = household.EligibilityInputsOf(tc.assets, rules)
			raw, err := json.Marshal(site)
			if err != nil {
				t.Fatal(err)
			}
			stored := &flexv1.Site{}
			if err := json.Unmarshal(raw, stored); err != nil {
				t.Fatal(err)
			}
			served := household.CurrentEligibility(stored, tc.assets, rules)
			if served == nil {
				t.Fatal("the stored status is not current against its own inputs")
			}
			want, err := EncodeEligibility(eligibilityRecord("site-id", fresh))
			if err != nil {
				t.Fatal(err)
			}
			got, err := EncodeEligibility(eligibilityRecord("site-id", *served))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("served\n%s\nevaluated\n%s", got, want)
			}
		})
	}
}
