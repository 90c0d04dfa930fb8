package eligibility

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

const (
	lp   = flexv1.PropositionLimitedPause
	fasc = flexv1.PropositionFullAssetScheduleControl
	pc   = flexv1.PropositionPriceCurve
)

func proposition(name flexv1.PropositionName, mutate ...func(*flexv1.PropositionSpec)) flexv1.Proposition {
	p := flexv1.Proposition{Spec: flexv1.PropositionSpec{Proposition: name, BoundaryMeterQualifies: ptr.To(true)}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

func model(objName, modelName string, cop11 bool, overrides ...flexv1.EnrolEligibilityOverride) flexv1.AssetModel {
	m := flexv1.AssetModel{Spec: flexv1.AssetModelSpec{ModelName: modelName, CoP11Qualified: cop11, EnrolEligibilityOverrides: overrides}}
	m.Name = objName
	return m
}

func charger(name, modelName, installed string) Asset {
	return Asset{Name: name, ID: "id-" + name, Spec: flexv1.AssetSpec{
		ExternalID: "ext-" + name, Type: flexv1.AssetTypeCharger, Model: modelName, InstallationDate: installed,
	}}
}

var consent = &metav1.Time{}

// mpan is a valid MPAN: every site of these tables has one unless the case is about its absence.
const mpan = "1200000000011"

func TestEvaluate(t *testing.T) {
	defaultRules := NewRules(
		[]flexv1.Proposition{proposition(pc), proposition(lp)}, // declared out of order on purpose
		[]flexv1.AssetModel{model("zappi", "zappi", true), model("cheap", "cheap", false)},
	)
	type want struct {
		eligible []flexv1.PropositionName
		issues   map[string][]flexv1.EligibilityIssue // asset name -> issues for limited_pause
	}
	tests := []struct {
		name   string
		site   flexv1.SiteSpec
		assets []Asset
		rules  Rules
		want   want
	}{
		{
			name:   "known CoP11 model with installation date qualifies through asset-level metering",
			assets: []Asset{charger("a", "zappi", "2025-06-15")},
			rules:  defaultRules,
			want:   want{eligible: []flexv1.PropositionName{lp, pc}, issues: map[string][]flexv1.EligibilityIssue{"a": nil}},
		},
		{
			name:   "no model, no date",
			assets: []Asset{charger("a", "", "")},
			rules:  defaultRules,
			want: want{issues: map[string][]flexv1.EligibilityIssue{
				"a": {flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet}}},
		},
		{
			name:   "unknown model",
			assets: []Asset{charger("a", "nope", "2025-01-01")},
			rules:  defaultRules,
			want:   want{issues: map[string][]flexv1.EligibilityIssue{"a": {flexv1.IssueAssetModelNotFound}}},
		},
		{
			name:   "model not CoP11 qualified",
			assets: []Asset{charger("a", "cheap", "2025-01-01")},
			rules:  defaultRules,
			want:   want{issues: map[string][]flexv1.EligibilityIssue{"a": {flexv1.IssueAssetModelNotCoP11Qualified}}},
		},
		{
			name:   "half-hourly settled site with consent qualifies through the boundary meter whatever the model",
			site:   flexv1.SiteSpec{HalfHourlySettled: true, BoundaryMeterConsentAt: consent},
			assets: []Asset{charger("a", "", "")},
			rules:  defaultRules,
			want:   want{eligible: []flexv1.PropositionName{lp, pc}, issues: map[string][]flexv1.EligibilityIssue{"a": nil}},
		},
		{
			name:   "consent without half-hourly settlement is not enough",
			site:   flexv1.SiteSpec{BoundaryMeterConsentAt: consent},
			assets: []Asset{charger("a", "", "2025-01-01")},
			rules:  defaultRules,
			want:   want{issues: map[string][]flexv1.EligibilityIssue{"a": {flexv1.IssueAssetModelNotSet}}},
		},
		{
			name:   "a proposition that does not accept boundary meter qualification",
			site:   flexv1.SiteSpec{HalfHourlySettled: true, BoundaryMeterConsentAt: consent},
			assets: []Asset{charger("a", "", "2025-01-01")},
			rules: NewRules([]flexv1.Proposition{proposition(lp, func(p *flexv1.PropositionSpec) { p.BoundaryMeterQualifies = ptr.To(false) })},
				nil),
			want: want{issues: map[string][]flexv1.EligibilityIssue{"a": {flexv1.IssueAssetModelNotSet}}},
		},
		{
			name:   "non-domestic site is never eligible",
			site:   flexv1.SiteSpec{NonDomestic: true, HalfHourlySettled: true, BoundaryMeterConsentAt: consent},
			assets: []Asset{charger("a", "zappi", "2025-01-01")},
			rules:  defaultRules,
			want:   want{issues: map[string][]flexv1.EligibilityIssue{"a": {flexv1.IssueNonDomesticSite}}},
		},
		{
			name:   "site is eligible when one of its assets is",
			assets: []Asset{charger("b", "", ""), charger("a", "zappi", "2025-01-01")},
			rules:  defaultRules,
			want: want{eligible: []flexv1.PropositionName{lp, pc}, issues: map[string][]flexv1.EligibilityIssue{
				"a": nil, "b": {flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet}}},
		},
		{
			name:   "model override blocks a proposition",
			assets: []Asset{charger("a", "blocked", "2025-01-01")},
			rules: NewRules([]flexv1.Proposition{proposition(lp), proposition(pc)}, []flexv1.AssetModel{
				model("blocked", "blocked", true, flexv1.EnrolEligibilityOverride{Proposition: lp, Eligible: false})}),
			want: want{eligible: []flexv1.PropositionName{pc}, issues: map[string][]flexv1.EligibilityIssue{
				"a": {flexv1.IssueAssetModelEnrolEligibilityOverride}}},
		},
		{
			name:   "model override allows a proposition whatever the metering rules say",
			assets: []Asset{charger("a", "legacy", "")},
			rules: NewRules([]flexv1.Proposition{proposition(lp)}, []flexv1.AssetModel{
				model("legacy", "legacy", false, flexv1.EnrolEligibilityOverride{Proposition: lp, Eligible: true})}),
			want: want{eligible: []flexv1.PropositionName{lp}, issues: map[string][]flexv1.EligibilityIssue{"a": nil}},
		},
		{
			name:   "proposition restricted to asset types",
			assets: []Asset{charger("a", "zappi", "2025-01-01")},
			rules: NewRules([]flexv1.Proposition{proposition(lp, func(p *flexv1.PropositionSpec) {
				p.AssetTypes = []flexv1.AssetType{flexv1.AssetTypeBattery}
			})}, []flexv1.AssetModel{model("zappi", "zappi", true)}),
			want: want{issues: map[string][]flexv1.EligibilityIssue{"a": {flexv1.IssueAssetTypeNotSupported}}},
		},
		{
			name:   "a household without an MPAN is eligible for nothing, whatever its assets",
			site:   flexv1.SiteSpec{MPAN: "-"},
			assets: []Asset{charger("a", "zappi", "2025-06-15"), charger("b", "", "")},
			rules:  defaultRules,
			want: want{issues: map[string][]flexv1.EligibilityIssue{
				"a": {flexv1.IssueSiteDetailsMissing},
				"b": {flexv1.IssueSiteDetailsMissing, flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet}}},
		},
		{
			name:  "no assets, no eligibility",
			rules: defaultRules,
			want:  want{issues: map[string][]flexv1.EligibilityIssue{}},
		},
		{
			name:   "duplicate model names: the object name that sorts first wins",
			assets: []Asset{charger("a", "dup", "2025-01-01")},
			rules: NewRules([]flexv1.Proposition{proposition(lp)}, []flexv1.AssetModel{
				model("z-second", "dup", false), model("a-first", "dup", true)}),
			want: want{eligible: []flexv1.PropositionName{lp}, issues: map[string][]flexv1.EligibilityIssue{"a": nil}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			switch tt.site.MPAN {
			case "":
				tt.site.MPAN = mpan
			case "-":
				tt.site.MPAN = ""
			}
			got := Evaluate(&tt.site, tt.assets, tt.rules)
			if wantSite := tt.site.MPAN == ""; wantSite != reflect.DeepEqual(got.SiteIssues,
				[]flexv1.EligibilityIssue{flexv1.IssueSiteDetailsMissing}) || !wantSite && got.SiteIssues != nil {
				t.Errorf("site issues = %v", got.SiteIssues)
			}
			if !reflect.DeepEqual(got.EligiblePropositions, tt.want.eligible) {
				t.Errorf("eligible propositions = %v, want %v", got.EligiblePropositions, tt.want.eligible)
			}
			if len(got.Assets) != len(tt.want.issues) {
				t.Fatalf("got %d assets, want %d", len(got.Assets), len(tt.want.issues))
			}
			for i, a := range got.Assets {
				if i > 0 && got.Assets[i-1].Name > a.Name {
					t.Errorf("assets not ordered by name: %q before %q", got.Assets[i-1].Name, a.Name)
				}
				wantIssues, ok := tt.want.issues[a.Name]
				if !ok {
					t.Fatalf("unexpected asset %q", a.Name)
				}
				if a.ID != "id-"+a.Name || a.ExternalID != "ext-"+a.Name {
					t.Errorf("asset %q: id/external id not carried over: %q %q", a.Name, a.ID, a.ExternalID)
				}
				for _, pe := range a.Propositions {
					if pe.Eligible != (len(pe.Issues) == 0) {
						t.Errorf("asset %q %s: eligible=%v with issues %v", a.Name, pe.Proposition, pe.Eligible, pe.Issues)
					}
					if pe.Proposition == lp && !reflect.DeepEqual(pe.Issues, wantIssues) {
						t.Errorf("asset %q limited_pause issues = %v, want %v", a.Name, pe.Issues, wantIssues)
					}
				}
			}
		})
	}
}

func TestPropositionsFollowAPIOrderAndOnlyDeclaredOnesAreOffered(t *testing.T) {
	rules := NewRules([]flexv1.Proposition{proposition(pc), proposition(fasc)}, nil)
	site := flexv1.SiteSpec{MPAN: mpan, HalfHourlySettled: true, BoundaryMeterConsentAt: consent}
	got := Evaluate(&site, []Asset{charger("a", "", "")}, rules)
	want := []flexv1.PropositionName{fasc, pc}
	if !reflect.DeepEqual(got.EligiblePropositions, want) {
		t.Fatalf("eligible = %v, want %v", got.EligiblePropositions, want)
	}
	if _, ok := rules.Proposition(lp); ok {
		t.Fatalf("limited_pause is not declared and must not be offered")
	}
}

func TestResultIssuesAreDistinctAcrossAssets(t *testing.T) {
	rules := NewRules([]flexv1.Proposition{proposition(lp)}, nil)
	got := Evaluate(&flexv1.SiteSpec{MPAN: mpan}, []Asset{charger("a", "", ""), charger("b", "x", "")}, rules)
	want := []flexv1.EligibilityIssue{flexv1.IssueAssetModelNotSet, flexv1.IssueInstallationDateNotSet, flexv1.IssueAssetModelNotFound}
	if issues := got.Issues(lp); !reflect.DeepEqual(issues, want) {
		t.Fatalf("issues = %v, want %v", issues, want)
	}
	if got.IsEligible(lp) {
		t.Fatalf("site must not be eligible")
	}
}
