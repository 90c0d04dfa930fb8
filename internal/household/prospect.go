package household

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
)

// A prospect is a household that asks what it would be eligible for before anything is
// stored (POST /entities/site/check-eligibility): a meter point and, optionally, the model of
// an asset it would install. Its eligibility is what the Site controller would compute for
// that site with that one asset, by the same function (Evaluate); nothing here decides
// eligibility itself.

// Prospect is a prospective site and the model of the one asset it would have.
type Prospect struct {
	// Site is the spec the site would have (ProspectSite).
	Site flexv1.SiteSpec
	// Model is the asset model's name; "" when none is named.
	Model string
}

// ProspectEligibility is a prospect's eligibility for every offered proposition.
type ProspectEligibility struct {
	// Properties are the site-level facts it was evaluated with (half-hourly settlement,
	// boundary meter consent).
	Properties flexv1.SiteProperties
	// Propositions in the order the API reports them; issues only where not eligible.
	Propositions []flexv1.PropositionEligibility
}

// ProspectSite is the site a prospect with this MPAN would be. Half-hourly settlement (and
// boundary meter consent, and whether the site is domestic) are facts about a stored site
// (spec.halfHourlySettled is declared on the Site; Flexsite has no meter-point registry to ask):
// when the organisation already has a live site with the MPAN, the prospect is that site
// as stored, which onboarding the same MPAN would keep (a merge never clears a field).
// Otherwise it is a new site with nothing known but its MPAN: not half-hourly settled, no
// consent.
func ProspectSite(mpan string, stored *flexv1.Site) flexv1.SiteSpec {
	if stored == nil || !stored.DeletionTimestamp.IsZero() || stored.Spec.MPAN != mpan {
		return flexv1.SiteSpec{MPAN: mpan}
	}
	return *stored.Spec.DeepCopy()
}

// prospectInstalled is the installation date of the prospect's asset. Asset-level metering
// needs an asset whose installation date is known; the prospect's asset is the one the
// household would install, and the rule asks only whether the date is known, not what it is.
const prospectInstalled = "1970-01-01"

// EvaluateProspect evaluates the prospect with the rules: its site with one installed asset
// of the model. The asset's type is the model's, as the catalogue lists it; a model sold as
// several types is evaluated as each (an asset of each type at the site), so a proposition
// that takes only some asset types is eligible when one of them is. Without a model, or with
// a model the catalogue lists no type for, the asset's type is not known, and a proposition
// restricted to some asset types reports asset_type_not_supported.
func EvaluateProspect(p Prospect, rules eligibility.Rules) ProspectEligibility {
	types := []flexv1.AssetType{""}
	if m, ok := rules.Model(p.Model); ok && len(m.AssetTypes) > 0 {
		types = m.AssetTypes
	}
	assets := make([]flexv1.Asset, len(types))
	for i, t := range types {
		assets[i] = flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("prospect-%d", i)},
			Spec: flexv1.AssetSpec{Type: t, Model: p.Model, InstallationDate: prospectInstalled}}
	}
	res := Evaluate(&p.Site, assets, rules)
	out := ProspectEligibility{Properties: res.Properties}
	// Every asset is evaluated for every offered proposition, in the API's order.
	for _, pe := range res.Assets[0].Propositions {
		e := flexv1.PropositionEligibility{Proposition: pe.Proposition, Eligible: res.IsEligible(pe.Proposition)}
		if !e.Eligible {
			e.Issues = res.Issues(pe.Proposition)
		}
		out.Propositions = append(out.Propositions, e)
	}
	return out
}
