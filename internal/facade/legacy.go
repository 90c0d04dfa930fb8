package facade

import (
	"net/http"
	"slices"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/units"
)

var allDispatchMethods = []flexv1.DispatchMethod{
	"cm_infrequent_dispatch", "full_asset_schedule_control", "limited_pause", "vpp_limited_control"}

// LegacyAssetRecord is the asset of the legacy onboard answer: id, external_id, type, site_id,
// properties.
type LegacyAssetRecord struct {
	ID         string           `json:"id"`
	ExternalID string           `json:"external_id"`
	Type       flexv1.AssetType `json:"type"`
	SiteID     string           `json:"site_id"`
	Properties AssetProperties  `json:"properties"`
}

// LegacyOnboardResponse answers the deprecated POST /entities/site/onboard-site-and-asset.
type LegacyOnboardResponse struct {
	Site  LegacySiteRecord  `json:"site"`
	Asset LegacyAssetRecord `json:"asset"`
}

// legacyOnboard creates one site and one asset, records the dispatch consent and enrols the
// site in the propositions among the dispatch methods. Unlike onboard it is not an upsert:
// an existing site or asset is a 409. Enrolment is declarative here (the Enrolment's status
// says whether it is active), as the deprecated endpoint never checked eligibility.
func (s *Server) legacyOnboard(r *http.Request, p *auth.Principal) (any, error) {
	var methods []flexv1.DispatchMethod
	req, rules, err := s.readUpsert(r, func(f *fields, body map[string]any) upsertRequest {
		var req upsertRequest
		if site, ok := f.object(body, []any{"body"}, "site", true); ok {
			req.site = parseSite(f, site, []any{"body", "site"})
		}
		if asset, ok := f.object(body, []any{"body"}, "asset", true); ok {
			req.assets = []assetInput{parseAsset(f, asset, []any{"body", "asset"}, s.Now())}
		}
		if consent, ok := f.object(body, []any{"body"}, "dispatch_consent", true); ok {
			loc := []any{"body", "dispatch_consent", "dispatch_methods"}
			items, _ := f.array(consent, loc[:2], "dispatch_methods", true)
			for i, item := range items {
				if m, ok := enumValue(f, item, at(loc, i), allDispatchMethods); ok {
					methods = append(methods, m)
				}
			}
		}
		return req
	})
	if err != nil {
		return nil, err
	}
	slices.Sort(methods)
	methods = slices.Compact(methods)
	var props []flexv1.PropositionName // the dispatch methods that are propositions
	for _, m := range methods {
		if slices.Contains(flexv1.AllPropositions, flexv1.PropositionName(m)) {
			props = append(props, flexv1.PropositionName(m))
		}
	}

	ctx := r.Context()
	var out LegacyOnboardResponse
	err = s.transact(ctx, func(st store, log *writeLog) error {
		plan, err := s.writeUpsert(ctx, st, log, p.Namespace, req, rules, func(plan *upsertPlan) error {
			if plan.siteBefore != nil && !log.wasCreated(plan.site) {
				return fail(http.StatusConflict, "Site with MPAN %s already exists", req.site.MPAN)
			}
			if a := plan.assets[0]; a.before != nil && !log.wasCreated(a.asset) {
				return fail(http.StatusConflict, "Asset with external_id %q already exists", a.asset.Spec.ExternalID)
			}
			plan.site.Spec.DispatchMethods = methods
			if slices.Contains(methods, "cm_infrequent_dispatch") {
				plan.site.Spec.Markets = []flexv1.Market{"cm"}
			}
			return nil
		}, props...)
		if err != nil {
			return err
		}
		for _, prop := range props {
			existing, err := s.liveEnrolment(ctx, st, log, plan.site, prop)
			if err != nil {
				return err
			}
			if _, err := s.ensureEnrolment(ctx, log, plan.site, existing, prop, false); err != nil {
				return err
			}
		}
		asset := plan.assets[0].asset
		out = LegacyOnboardResponse{
			Site: legacySiteRecord(plan.site, []flexv1.Asset{*asset}, false),
			Asset: LegacyAssetRecord{ID: asset.Labels[flexv1.IDLabel], ExternalID: asset.Spec.ExternalID,
				Type:   asset.Spec.Type,
				SiteID: plan.siteID(), Properties: AssetProperties{PowerKW: units.ToKilo(asset.Spec.PowerW),
					CapacityKWh: units.ToKilo(asset.Spec.CapacityWh)}},
		}
		return nil
	})
	return out, err
}
