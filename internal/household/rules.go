package household

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

// LoadRules reads the eligibility rules in force (Propositions and the AssetModel catalogue).
// Every door evaluates with the rules read here, so none disagrees with Site.status.
func LoadRules(ctx context.Context, r client.Reader) (eligibility.Rules, error) {
	props := &flexv1.PropositionList{}
	// The rules are only read, never changed: skip the cache's defensive deep copy, which
	// matters when a catalogue change re-evaluates thousands of sites.
	if err := r.List(ctx, props, client.UnsafeDisableDeepCopy); err != nil {
		return eligibility.Rules{}, err
	}
	models := &flexv1.AssetModelList{}
	if err := r.List(ctx, models, client.UnsafeDisableDeepCopy); err != nil {
		return eligibility.Rules{}, err
	}
	return eligibility.NewRules(props.Items, models.Items), nil
}

// Evaluate computes a site's eligibility from its spec and its assets with the rules.
// Assets on their way out no longer count. The Site controller writes the result into
// status; the REST facade answers with it before (and without) writing.
func Evaluate(site *flexv1.SiteSpec, assets []flexv1.Asset, rules eligibility.Rules) eligibility.Result {
	inputs := make([]eligibility.Asset, 0, len(assets))
	for i := range assets {
		a := &assets[i]
		if a.DeletionTimestamp.IsZero() {
			inputs = append(inputs, eligibility.Asset{Name: a.Name, ID: a.Labels[flexv1.IDLabel], Spec: a.Spec})
		}
	}
	return eligibility.Evaluate(site, inputs, rules)
}

// EvaluatedEligibility is the eligibility the Site controller last wrote into the site's
// status (nil when it never did), and whether it was computed from the site's current spec.
func EvaluatedEligibility(site *flexv1.Site) (*eligibility.Result, bool) {
	for _, c := range site.Status.Conditions {
		if c.Type == flexv1.EligibleCondition {
			return &eligibility.Result{Properties: site.Status.Properties,
					EligiblePropositions: site.Status.EligiblePropositions, Assets: site.Status.Assets},
				c.ObservedGeneration == site.Generation && site.Status.ObservedGeneration == site.Generation
		}
	}
	return nil, false
}
