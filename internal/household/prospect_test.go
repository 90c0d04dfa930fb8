package household

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

const (
	fasc = flexv1.PropositionFullAssetScheduleControl
	pc   = flexv1.PropositionPriceCurve
)

// prospectRules are the default rules of config/rules (the three propositions, boundary
// meters qualifying) plus a proposition variant and models for the edge cases.
func prospectRules(mutate ...func(name flexv1.PropositionName, p *flexv1.PropositionSpec)) eligibility.Rules {
	props := make([]flexv1.Proposition, 0, len(flexv1.AllPropositions))
	for _, name := range flexv1.AllPropositions {
		spec := flexv1.PropositionSpec{Proposition: name, BoundaryMeterQualifies: ptr.To(true),
			RequiresBoundaryMeterConsent: name == fasc}
		for _, m := range mutate {
			m(name, &spec)
		}
		props = append(props, flexv1.Proposition{Spec: spec})
	}
	model := func(name string, cop11 bool, types []flexv1.AssetType, overrides ...flexv1.EnrolEligibilityOverride) flexv1.AssetModel {
		m := flexv1.AssetModel{Spec: flexv1.AssetModelSpec{ModelName: name, CoP11Qualified: cop11, AssetTypes: types,
			EnrolEligibilityOverrides: overrides}}
		m.Name = name
		return m
	}
	charger, battery := flexv1.AssetTypeCharger, flexv1.AssetTypeBattery
	return eligibility.NewRules(props, []flexv1.AssetModel{
		model("zappi", true, []flexv1.AssetType{charger}),
		model("generic_heat_pump", false, []flexv1.AssetType{flexv1.AssetTypeHeatPump}),
		model("legacy_charger", false, []flexv1.AssetType{charger}, flexv1.EnrolEligibilityOverride{Proposition: lp}),
		model("hybrid", true, []flexv1.AssetType{charger, battery}),
		model("untyped", true, nil),
	})
}

// onlyBatteries restricts price_curve to batteries.
func onlyBatteries(name flexv1.PropositionName, p *flexv1.PropositionSpec) {
	if name == pc {
		p.AssetTypes = []flexv1.AssetType{flexv1.AssetTypeBattery}
	}
}

func TestProspectSite(t *testing.T) {
	const mpan = "1200000000011"
	stored := &flexv1.Site{Spec: flexv1.SiteSpec{MPAN: mpan, Postcode: "SW1A 1AA", HalfHourlySettled: true,
		BoundaryMeterConsentAt: at(t0), NonDomestic: true, DispatchMethods: []flexv1.DispatchMethod{"limited_pause"}}}
	going := stored.DeepCopy()
	going.DeletionTimestamp = at(t0)
	other := stored.DeepCopy()
	other.Spec.MPAN = "2301234567894"
	cases := []struct {
		name   string
		stored *flexv1.Site
		want   flexv1.SiteSpec
	}{
		{name: "no stored site: a new site with only its MPAN", stored: nil, want: flexv1.SiteSpec{MPAN: mpan}},
		{name: "the organisation's stored site, as stored", stored: stored, want: stored.Spec},
		{name: "a site on its way out is not the prospect", stored: going, want: flexv1.SiteSpec{MPAN: mpan}},
		{name: "a site of another MPAN is not the prospect", stored: other, want: flexv1.SiteSpec{MPAN: mpan}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := ProspectSite(mpan, tc.stored)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if tc.stored != nil && len(got.DispatchMethods) > 0 {
				got.DispatchMethods[0] = "changed"
				if tc.stored.Spec.DispatchMethods[0] == "changed" {
					t.Error("the prospect shares the stored site's memory")
				}
			}
		})
	}
}

// TestEvaluateProspect covers every route to eligibility and every issue a prospect can meet.
func TestEvaluateProspect(t *testing.T) {
	type verdict struct {
		eligible bool
		issues   []flexv1.EligibilityIssue
	}
	yes := verdict{eligible: true}
	no := func(issues ...flexv1.EligibilityIssue) verdict { return verdict{issues: issues} }
	all := func(v verdict) map[flexv1.PropositionName]verdict {
		return map[flexv1.PropositionName]verdict{lp: v, fasc: v, pc: v}
	}
	mpan := flexv1.SiteSpec{MPAN: "1200000000011"}
	hhConsented := flexv1.SiteSpec{MPAN: "1200000000011", HalfHourlySettled: true, BoundaryMeterConsentAt: at(t0)}
	hhOnly := flexv1.SiteSpec{MPAN: "1200000000011", HalfHourlySettled: true}
	nonDomestic := flexv1.SiteSpec{MPAN: "1200000000011", NonDomestic: true, HalfHourlySettled: true, BoundaryMeterConsentAt: at(t0)}

	cases := []struct {
		name   string
		site   flexv1.SiteSpec
		model  string
		rules  eligibility.Rules
		wantHH bool
		want   map[flexv1.PropositionName]verdict
	}{
		{name: "a new MPAN without a model: no route qualifies", site: mpan, rules: prospectRules(),
			want: all(no(flexv1.IssueAssetModelNotSet))},
		{name: "a new MPAN with a CoP11 model: asset-level metering, the asset counted as installed", site: mpan, model: "zappi",
			rules: prospectRules(), want: all(yes)},
		{name: "a model that is not CoP11 qualified", site: mpan, model: "generic_heat_pump", rules: prospectRules(),
			want: all(no(flexv1.IssueAssetModelNotCoP11Qualified))},
		{name: "a model the catalogue does not know", site: mpan, model: "nope", rules: prospectRules(),
			want: all(no(flexv1.IssueAssetModelNotFound))},
		{name: "a model overridden out of one proposition", site: mpan, model: "legacy_charger", rules: prospectRules(),
			want: map[flexv1.PropositionName]verdict{lp: no(flexv1.IssueAssetModelEnrolEligibilityOverride),
				fasc: no(flexv1.IssueAssetModelNotCoP11Qualified), pc: no(flexv1.IssueAssetModelNotCoP11Qualified)}},
		{name: "a stored half-hourly settled site with consent qualifies through its boundary meter, whatever the model",
			site: hhConsented, model: "generic_heat_pump", rules: prospectRules(), wantHH: true, want: all(yes)},
		{name: "... and without a model", site: hhConsented, rules: prospectRules(), wantHH: true, want: all(yes)},
		{name: "a half-hourly settled site without consent needs asset-level metering", site: hhOnly, rules: prospectRules(),
			wantHH: true, want: all(no(flexv1.IssueAssetModelNotSet))},
		{name: "... which a CoP11 model gives it", site: hhOnly, model: "zappi", rules: prospectRules(), wantHH: true, want: all(yes)},
		{name: "where boundary meters do not qualify, a half-hourly settled site needs a CoP11 model", site: hhConsented,
			rules:  prospectRules(func(_ flexv1.PropositionName, p *flexv1.PropositionSpec) { p.BoundaryMeterQualifies = ptr.To(false) }),
			wantHH: true, want: all(no(flexv1.IssueAssetModelNotSet))},
		{name: "a non-domestic site qualifies for nothing", site: nonDomestic, model: "zappi", rules: prospectRules(), wantHH: true,
			want: all(no(flexv1.IssueNonDomesticSite))},
		{name: "a proposition for batteries only, with a charger model", site: mpan, model: "zappi", rules: prospectRules(onlyBatteries),
			want: map[flexv1.PropositionName]verdict{lp: yes, fasc: yes, pc: no(flexv1.IssueAssetTypeNotSupported)}},
		{name: "a proposition for batteries only, with a model sold as charger and battery", site: mpan, model: "hybrid",
			rules: prospectRules(onlyBatteries), want: all(yes)},
		{name: "a proposition for batteries only, with a model of no listed type", site: mpan, model: "untyped",
			rules: prospectRules(onlyBatteries), want: map[flexv1.PropositionName]verdict{lp: yes, fasc: yes,
				pc: no(flexv1.IssueAssetTypeNotSupported)}},
		{name: "a proposition for batteries only, without a model", site: hhConsented, rules: prospectRules(onlyBatteries),
			wantHH: true, want: map[flexv1.PropositionName]verdict{lp: yes, fasc: yes, pc: no(flexv1.IssueAssetTypeNotSupported)}},
		{name: "nothing offered: no propositions", site: mpan, model: "zappi", rules: eligibility.Rules{},
			want: map[flexv1.PropositionName]verdict{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := EvaluateProspect(Prospect{Site: tc.site, Model: tc.model}, tc.rules)
			if got.Properties.IsHalfHourlySettled != tc.wantHH {
				t.Errorf("half-hourly settled %v, want %v", got.Properties.IsHalfHourlySettled, tc.wantHH)
			}
			if got.Properties.HasMeterConsent != (tc.site.BoundaryMeterConsentAt != nil) {
				t.Errorf("meter consent %v", got.Properties.HasMeterConsent)
			}
			if len(got.Propositions) != len(tc.want) {
				t.Fatalf("propositions %+v, want %d", got.Propositions, len(tc.want))
			}
			for i, pe := range got.Propositions {
				if pe.Proposition != flexv1.AllPropositions[i] {
					t.Errorf("proposition %d is %s: not in the API's order", i, pe.Proposition)
				}
				want := tc.want[pe.Proposition]
				if pe.Eligible != want.eligible || !reflect.DeepEqual(pe.Issues, want.issues) {
					t.Errorf("%s: eligible %v, issues %v; want %v, %v", pe.Proposition, pe.Eligible, pe.Issues, want.eligible, want.issues)
				}
			}
		})
	}
}

// TestProspectAgreesWithTheController checks the prospect's answer is the Site controller's
// evaluation of the same site with one installed asset of the model: the same function, not
// a second copy of the rules.
func TestProspectAgreesWithTheController(t *testing.T) {
	rules := prospectRules()
	sites := []flexv1.SiteSpec{
		{MPAN: "1200000000011"},
		{MPAN: "1200000000011", HalfHourlySettled: true},
		{MPAN: "1200000000011", HalfHourlySettled: true, BoundaryMeterConsentAt: at(t0)},
		{MPAN: "1200000000011", NonDomestic: true},
	}
	for _, site := range sites {
		for _, m := range []struct {
			model string
			typ   flexv1.AssetType
		}{{"zappi", flexv1.AssetTypeCharger}, {"generic_heat_pump", flexv1.AssetTypeHeatPump},
			{"legacy_charger", flexv1.AssetTypeCharger}, {"", ""}, {"nope", ""}} {
			asset := flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Name: "installed"},
				Spec: flexv1.AssetSpec{Type: m.typ, Model: m.model, InstallationDate: "2025-06-15"}}
			stored := Evaluate(&site, []flexv1.Asset{asset}, rules)
			got := EvaluateProspect(Prospect{Site: site, Model: m.model}, rules)
			if !reflect.DeepEqual(got.Properties, stored.Properties) {
				t.Errorf("site %+v, model %q: properties %+v, the controller's %+v", site, m.model, got.Properties, stored.Properties)
			}
			if !reflect.DeepEqual(got.Propositions, stored.Assets[0].Propositions) {
				t.Errorf("site %+v, model %q: %+v, the controller's %+v", site, m.model, got.Propositions, stored.Assets[0].Propositions)
			}
		}
	}
}
