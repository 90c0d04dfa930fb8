package household

import (
	"strconv"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

// RulesFor is the rules of a listed catalogue: the last ones built, when the catalogue is
// exactly the one they were built from, or new ones (kept for next time).
func RulesFor(props []flexv1.Proposition, models []flexv1.AssetModel) eligibility.Rules {
	if built := lastRules.Load(); built != nil && built.matches(props, models) {
		return built.rules
	}
	rules := eligibility.NewRules(props, models)
	if b := newBuiltRules(rules, props, models); b != nil {
		lastRules.Store(b)
	}
	return rules
}

// lastRules are the rules LoadRules built last, with the catalogue they were built from.
var lastRules atomic.Pointer[builtRules]

// builtRules are rules and the versions of the objects they were built from.
type builtRules struct {
	rules eligibility.Rules
	// versions of the Propositions and AssetModels, by UID.
	props, models map[types.UID]string
}

// newBuiltRules records what rules were built from; nil when an object has no UID or no
// resourceVersion (not read from an API server), as such rules cannot be told apart.
func newBuiltRules(rules eligibility.Rules, props []flexv1.Proposition, models []flexv1.AssetModel) *builtRules {
	b := &builtRules{rules: rules,
		props: make(map[types.UID]string, len(props)), models: make(map[types.UID]string, len(models))}
	for i := range props {
		if !record(b.props, props[i].UID, props[i].ResourceVersion) {
			return nil
		}
	}
	for i := range models {
		if !record(b.models, models[i].UID, models[i].ResourceVersion) {
			return nil
		}
	}
	return b
}

func record(versions map[types.UID]string, uid types.UID, rv string) bool {
	if uid == "" || rv == "" {
		return false
	}
	versions[uid] = rv
	return true
}

// matches reports whether the listed catalogue is exactly the one the rules were built from.
func (b *builtRules) matches(props []flexv1.Proposition, models []flexv1.AssetModel) bool {
	if len(props) != len(b.props) || len(models) != len(b.models) {
		return false
	}
	for i := range props {
		if rv, ok := b.props[props[i].UID]; !ok || rv != props[i].ResourceVersion {
			return false
		}
	}
	for i := range models {
		if rv, ok := b.models[models[i].UID]; !ok || rv != models[i].ResourceVersion {
			return false
		}
	}
	return true
}

// Evaluate computes a site's eligibility from its spec and its assets with the rules.
// Assets on their way out no longer count. The Site controller writes the result into
// status; the REST API answers with it before (and without) writing.
func Evaluate(site *flexv1.SiteSpec, assets []flexv1.Asset, rules eligibility.Rules) eligibility.Result {
	ptrs := make([]*flexv1.Asset, len(assets))
	for i := range assets {
		ptrs[i] = &assets[i]
	}
	return EvaluateAssets(site, ptrs, rules)
}

// EvaluateAssets is Evaluate of assets held by pointer (cached objects, not copied).
func EvaluateAssets(site *flexv1.SiteSpec, assets []*flexv1.Asset, rules eligibility.Rules) eligibility.Result {
	inputs := make([]eligibility.Asset, 0, len(assets))
	for _, a := range assets {
		if a.DeletionTimestamp.IsZero() {
			inputs = append(inputs, eligibility.Asset{Name: a.Name, ID: a.Labels[flexv1.IDLabel], Spec: a.Spec})
		}
	}
	return eligibility.Evaluate(site, inputs, rules)
}

// EligibilityInputsOf names the inputs of an evaluation besides the site's spec: the assets
// EvaluateAssets counts (the live ones: uid, generation and API id each) and the version of
// the part of the catalogue they read (eligibility.Rules.VersionFor). The Site controller
// writes it into status.evaluatedFrom with the result; CurrentEligibility compares it with
// what a reader holds.
func EligibilityInputsOf(assets []*flexv1.Asset, rules eligibility.Rules) flexv1.EligibilityInputs {
	keys := make([]string, 0, len(assets))
	models := make([]string, 0, len(assets))
	for _, a := range assets {
		if a.DeletionTimestamp.IsZero() {
			keys = append(keys, string(a.UID)+"/"+strconv.FormatInt(a.Generation, 10)+"/"+a.Labels[flexv1.IDLabel])
			models = append(models, a.Spec.Model)
		}
	}
	return flexv1.EligibilityInputs{Assets: eligibility.Digest(keys), Catalogue: rules.VersionFor(models)}
}

// CurrentEligibility is the eligibility the Site controller wrote into the site's status,
// when it was computed from exactly what the caller holds: the site's current spec
// (generation), these assets of the site and these rules (EligibilityInputsOf); nil when the
// status is behind (or ahead of) them. It is how every reader of a site's eligibility tells a
// verdict it may use from one still to come: the REST API's read, the Enrolment controller
// and the Enrolment admission webhook.
func CurrentEligibility(site *flexv1.Site, assets []*flexv1.Asset, rules eligibility.Rules) *eligibility.Result {
	res, current := EvaluatedEligibility(site)
	if !current || site.Status.EvaluatedFrom != EligibilityInputsOf(assets, rules) {
		return nil
	}
	return res
}

// EvaluatedEligibility is the eligibility the Site controller last wrote into the site's
// status (nil when it never did), and whether it was computed from the site's current spec.
func EvaluatedEligibility(site *flexv1.Site) (*eligibility.Result, bool) {
	for _, c := range site.Status.Conditions {
		if c.Type == flexv1.EligibleCondition {
			return &eligibility.Result{Properties: site.Status.Properties, SiteIssues: eligibility.SiteIssues(&site.Spec),
					EligiblePropositions: site.Status.EligiblePropositions, Assets: site.Status.Assets},
				c.ObservedGeneration == site.Generation && site.Status.ObservedGeneration == site.Generation
		}
	}
	return nil, false
}
