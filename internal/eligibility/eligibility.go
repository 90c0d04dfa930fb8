// Package eligibility decides which flexibility propositions a site and each of its assets
// qualify for. It is a pure function of the site, its assets and the rules (Propositions and
// the AssetModel catalogue): the Site controller writes its result into Site.status and the
// REST API answers initialise, eligibility and onboard pre-checks with it, so an answer
// never disagrees with status.
package eligibility

import (
	"encoding/json"
	"hash/fnv"
	"slices"
	"sort"
	"strconv"

	"k8s.io/utils/ptr"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Rules are the eligibility rules in force: the offered propositions and the asset-model
// catalogue. Build them with NewRules; the zero value offers nothing.
type Rules struct {
	// propositions in the API's order (AllPropositions), one per proposition name.
	propositions []flexv1.PropositionSpec
	// models by spec.modelName.
	models map[string]*flexv1.AssetModelSpec
	// propositionsVersion is a digest of the Propositions the rules were built from, and
	// modelVersions the version of each model's AssetModel, by spec.modelName (VersionFor).
	propositionsVersion string
	modelVersions       map[string]string
}

// NewRules indexes the declared propositions and asset models. Duplicate model names are
// resolved deterministically: the AssetModel whose object name sorts first wins.
func NewRules(propositions []flexv1.Proposition, models []flexv1.AssetModel) Rules {
	byName := make(map[flexv1.PropositionName]flexv1.PropositionSpec, len(propositions))
	for i := range propositions {
		byName[propositions[i].Spec.Proposition] = propositions[i].Spec
	}
	r := Rules{models: make(map[string]*flexv1.AssetModelSpec, len(models)),
		modelVersions: make(map[string]string, len(models))}
	for _, name := range flexv1.AllPropositions {
		if p, ok := byName[name]; ok {
			r.propositions = append(r.propositions, p)
		}
	}
	sorted := slices.Clone(models)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	for i := range sorted {
		if _, taken := r.models[sorted[i].Spec.ModelName]; !taken {
			r.models[sorted[i].Spec.ModelName] = &sorted[i].Spec
			r.modelVersions[sorted[i].Spec.ModelName] = Digest([]string{specVersion(sorted[i].Spec)})
		}
	}
	keys := make([]string, len(r.propositions))
	for i, p := range r.propositions {
		p.Description = "" // told, not a rule
		keys[i] = specVersion(p)
	}
	r.propositionsVersion = Digest(keys)
	return r
}

// specVersion names a rule by its content, so that a change that does not touch it (a
// description, a status) leaves the version alone.
func specVersion(spec any) string {
	b, err := json.Marshal(spec)
	if err != nil { // a spec of plain fields always encodes
		panic(err)
	}
	return string(b)
}

// VersionFor is a digest of the rules that an evaluation of assets of these models reads:
// the offered propositions' rules, and the rules of the AssetModel each model name resolves
// to (or its absence), by content, in any order. Rules of the same VersionFor evaluate such
// assets alike. A catalogue change re-evaluates the sites whose VersionFor it may move: a
// Proposition change, every site; an AssetModel change, the sites with an asset of that
// model. A Site's status records it (status.evaluatedFrom.catalogue), so that a reader can
// tell whether the status was computed with the rules it holds.
func (r Rules) VersionFor(models []string) string {
	keys := make([]string, 0, len(models)+1)
	keys = append(keys, "propositions="+r.propositionsVersion)
	for _, m := range models {
		keys = append(keys, "model "+m+"="+r.modelVersions[m])
	}
	keys = slices.Compact(slices.Sorted(slices.Values(keys)))
	return Digest(keys)
}

// Digest is a short, stable digest of keys, whatever their order (64-bit FNV-1a, hex).
func Digest(keys []string) string {
	slices.Sort(keys)
	h := fnv.New64a()
	for _, k := range keys {
		_, _ = h.Write([]byte(k))
		_, _ = h.Write([]byte{0})
	}
	return strconv.FormatUint(h.Sum64(), 16)
}

// Proposition returns the rules of one proposition, if it is offered.
func (r Rules) Proposition(name flexv1.PropositionName) (flexv1.PropositionSpec, bool) {
	for _, p := range r.propositions {
		if p.Proposition == name {
			return p, true
		}
	}
	return flexv1.PropositionSpec{}, false
}

// Model looks an asset model up by the name API clients use.
func (r Rules) Model(name string) (*flexv1.AssetModelSpec, bool) {
	m, ok := r.models[name]
	return m, ok
}

// Asset is one asset as eligibility sees it.
type Asset struct {
	// Name of the Asset object; results are ordered by it.
	Name string
	// ID is the asset's API identifier.
	ID   string
	Spec flexv1.AssetSpec
}

// Result is the eligibility of a site: what Site.status holds.
type Result struct {
	Properties flexv1.SiteProperties
	// SiteIssues are the issues of the site itself (SiteIssues): while there are any, no
	// proposition is eligible, and every asset's row names them too.
	SiteIssues           []flexv1.EligibilityIssue
	EligiblePropositions []flexv1.PropositionName
	Assets               []flexv1.AssetEligibility
}

// IsEligible reports whether the site may enrol in the proposition.
func (r Result) IsEligible(p flexv1.PropositionName) bool {
	return slices.Contains(r.EligiblePropositions, p)
}

// Issues returns the distinct issue codes of every asset for one proposition, in order of
// first appearance: why a site is not eligible for it.
func (r Result) Issues(p flexv1.PropositionName) []flexv1.EligibilityIssue {
	var out []flexv1.EligibilityIssue
	for _, a := range r.Assets {
		for _, pe := range a.Propositions {
			if pe.Proposition != p {
				continue
			}
			for _, issue := range pe.Issues {
				if !slices.Contains(out, issue) {
					out = append(out, issue)
				}
			}
		}
	}
	return out
}

// SiteIssues are the issues of the site itself, whatever its assets: a household created on
// demand for a component token has no MPAN until the hosted flow or the organisation fills it
// in, and no proposition can take a site without a meter point.
func SiteIssues(site *flexv1.SiteSpec) []flexv1.EligibilityIssue {
	if site.MPAN == "" {
		return []flexv1.EligibilityIssue{flexv1.IssueSiteDetailsMissing}
	}
	return nil
}

// SitePropertiesOf derives the site-level facts eligibility depends on.
func SitePropertiesOf(site *flexv1.SiteSpec) flexv1.SiteProperties {
	return flexv1.SiteProperties{
		HasMeterConsent:     site.BoundaryMeterConsentAt != nil,
		IsHalfHourlySettled: site.HalfHourlySettled,
	}
}

// Evaluate computes the eligibility of a site and each of its assets for every offered
// proposition. A site is eligible for a proposition when at least one of its assets is.
func Evaluate(site *flexv1.SiteSpec, assets []Asset, rules Rules) Result {
	res := Result{Properties: SitePropertiesOf(site), SiteIssues: SiteIssues(site)}
	sorted := slices.Clone(assets)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })

	eligible := make(map[flexv1.PropositionName]bool, len(rules.propositions))
	for _, a := range sorted {
		ae := flexv1.AssetEligibility{Name: a.Name, ID: a.ID, ExternalID: a.Spec.ExternalID}
		for i := range rules.propositions {
			p := &rules.propositions[i]
			issues := assetIssues(site, res.Properties, &a.Spec, p, rules)
			if len(res.SiteIssues) > 0 {
				issues = append(slices.Clone(res.SiteIssues), issues...)
			}
			ae.Propositions = append(ae.Propositions, flexv1.PropositionEligibility{
				Proposition: p.Proposition,
				Eligible:    len(issues) == 0,
				Issues:      issues,
			})
			if len(issues) == 0 {
				eligible[p.Proposition] = true
			}
		}
		res.Assets = append(res.Assets, ae)
	}
	for _, p := range rules.propositions {
		if eligible[p.Proposition] {
			res.EligiblePropositions = append(res.EligiblePropositions, p.Proposition)
		}
	}
	return res
}

// assetIssues applies the rules of one proposition to one asset; no issues means eligible.
func assetIssues(site *flexv1.SiteSpec, props flexv1.SiteProperties, asset *flexv1.AssetSpec,
	p *flexv1.PropositionSpec, rules Rules) []flexv1.EligibilityIssue {
	var issues []flexv1.EligibilityIssue
	if site.NonDomestic {
		issues = append(issues, flexv1.IssueNonDomesticSite)
	}
	if len(p.AssetTypes) > 0 && !slices.Contains(p.AssetTypes, asset.Type) {
		issues = append(issues, flexv1.IssueAssetTypeNotSupported)
	}

	model, modelKnown := rules.Model(asset.Model)
	if modelKnown {
		for _, o := range model.EnrolEligibilityOverrides {
			if o.Proposition != p.Proposition {
				continue
			}
			if !o.Eligible {
				return append(issues, flexv1.IssueAssetModelEnrolEligibilityOverride)
			}
			// A forced yes settles the metering question; site-level and type rules still hold.
			return issues
		}
	}

	// A half-hourly settled site with boundary meter consent qualifies through its boundary
	// meter, whatever its asset models.
	// Unset is the CRD default, true (which a Proposition built in Go has not been given).
	if ptr.Deref(p.BoundaryMeterQualifies, true) && props.HasMeterConsent && props.IsHalfHourlySettled {
		return issues
	}
	// Otherwise the asset must qualify through asset-level metering: a known, CoP11-qualified
	// model, installed on a known date.
	switch {
	case asset.Model == "":
		issues = append(issues, flexv1.IssueAssetModelNotSet)
	case !modelKnown:
		issues = append(issues, flexv1.IssueAssetModelNotFound)
	case !model.CoP11Qualified:
		issues = append(issues, flexv1.IssueAssetModelNotCoP11Qualified)
	}
	if asset.InstallationDate == "" {
		issues = append(issues, flexv1.IssueInstallationDateNotSet)
	}
	return issues
}
