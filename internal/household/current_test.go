package household

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

// A site's status is served (REST), decided on (Enrolment controller and webhook) only while
// it was computed from exactly the inputs the reader holds: the site's spec (generation), its
// live assets and the part of the catalogue they read. Each input changed alone makes it
// stale; what the evaluation does not read (another model, a description) does not.
func TestCurrentEligibilityComparesEveryInput(t *testing.T) {
	prop := func(consent bool, description string) flexv1.Proposition {
		return flexv1.Proposition{ObjectMeta: metav1.ObjectMeta{Name: "lp", UID: "p"},
			Spec: flexv1.PropositionSpec{Proposition: lp, RequiresBoundaryMeterConsent: consent, Description: description}}
	}
	model := func(name string, uid types.UID, cop11 bool) flexv1.AssetModel {
		return flexv1.AssetModel{ObjectMeta: metav1.ObjectMeta{Name: string(uid), UID: uid},
			Spec: flexv1.AssetModelSpec{ModelName: name, CoP11Qualified: cop11}}
	}
	asset := func(uid types.UID, gen int64, model string) *flexv1.Asset {
		return &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Name: "asset-" + string(uid), UID: uid, Generation: gen,
			Labels: map[string]string{flexv1.IDLabel: "id-" + string(uid)}}, Spec: flexv1.AssetSpec{Model: model}}
	}
	type inputs struct {
		gen    int64
		assets []*flexv1.Asset
		props  []flexv1.Proposition
		models []flexv1.AssetModel
	}
	evaluatedFrom := func() inputs {
		return inputs{gen: 2, assets: []*flexv1.Asset{asset("a", 1, "zappi"), asset("b", 3, "eddi")},
			props:  []flexv1.Proposition{prop(false, "")},
			models: []flexv1.AssetModel{model("zappi", "z", true), model("eddi", "e", false), model("ohme", "o", false)}}
	}
	// The status as the Site controller writes it, from evaluatedFrom.
	in := evaluatedFrom()
	rules := eligibility.NewRules(in.props, in.models)
	site := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "home", Generation: in.gen}}
	site.Status.ObservedGeneration = in.gen
	site.Status.Conditions = []metav1.Condition{{Type: flexv1.EligibleCondition, ObservedGeneration: in.gen}}
	site.Status.EvaluatedFrom = EligibilityInputsOf(in.assets, rules)
	res := EvaluateAssets(&site.Spec, in.assets, rules)
	site.Status.Assets, site.Status.EligiblePropositions = res.Assets, res.EligiblePropositions

	cases := []struct {
		name    string
		change  func(*inputs)
		current bool
	}{
		{"same inputs", func(*inputs) {}, true},
		{"assets in another order", func(in *inputs) { in.assets[0], in.assets[1] = in.assets[1], in.assets[0] }, true},
		{"an unread asset model changed", func(in *inputs) { in.models[2] = model("ohme", "o", true) }, true},
		{"a proposition's description changed", func(in *inputs) { in.props[0] = prop(false, "told") }, true},
		{"asset's model redeclared alike", func(in *inputs) { in.models[1] = model("eddi", "e2", false) }, true},
		{"asset being deleted was not counted", func(in *inputs) {
			gone := asset("c", 1, "zappi")
			gone.DeletionTimestamp = ptrNow()
			in.assets = append(in.assets, gone)
		}, true},
		{"site spec changed", func(in *inputs) { in.gen = 3 }, false},
		{"asset added", func(in *inputs) { in.assets = append(in.assets, asset("c", 1, "zappi")) }, false},
		{"asset removed", func(in *inputs) { in.assets = in.assets[:1] }, false},
		{"asset spec changed", func(in *inputs) { in.assets[1] = asset("b", 4, "eddi") }, false},
		{"asset replaced by a namesake", func(in *inputs) { in.assets[1] = asset("x", 3, "eddi") }, false},
		{"asset's id given", func(in *inputs) { in.assets[0].Labels[flexv1.IDLabel] = "other" }, false},
		{"asset being deleted", func(in *inputs) { in.assets[0].DeletionTimestamp = ptrNow() }, false},
		{"proposition's rule changed", func(in *inputs) { in.props[0] = prop(true, "") }, false},
		{"proposition withdrawn", func(in *inputs) { in.props = nil }, false},
		{"asset's model changed", func(in *inputs) { in.models[0] = model("zappi", "z", false) }, false},
		{"asset's model deleted", func(in *inputs) { in.models = in.models[1:] }, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			in := evaluatedFrom()
			tc.change(&in)
			read := site.DeepCopy()
			read.Generation = in.gen
			got := CurrentEligibility(read, in.assets, eligibility.NewRules(in.props, in.models))
			if current := got != nil; current != tc.current {
				t.Fatalf("current = %v, want %v", current, tc.current)
			}
			if got != nil && len(got.Assets) != 2 {
				t.Fatalf("served %d assets, want the status's 2", len(got.Assets))
			}
		})
	}

	t.Run("never evaluated", func(t *testing.T) {
		in := evaluatedFrom()
		fresh := &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Name: "home", Generation: 1}}
		fresh.Status.ObservedGeneration = -1
		if CurrentEligibility(fresh, in.assets, eligibility.NewRules(in.props, in.models)) != nil {
			t.Fatal("a site never evaluated has a current eligibility")
		}
	})
	t.Run("evaluated before the inputs were recorded", func(t *testing.T) {
		in := evaluatedFrom()
		old := site.DeepCopy()
		old.Status.EvaluatedFrom = flexv1.EligibilityInputs{}
		if CurrentEligibility(old, in.assets, eligibility.NewRules(in.props, in.models)) != nil {
			t.Fatal("a status without evaluatedFrom is current")
		}
	})
}

func ptrNow() *metav1.Time { now := metav1.Now(); return &now }
