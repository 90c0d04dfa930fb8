package facade

import (
	"net/http"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/controllers"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/identity"
)

var allDispatchMethods = []flexv1.DispatchMethod{
	"cm_infrequent_dispatch", "full_asset_schedule_control", "limited_pause", "vpp_limited_control"}

// LegacyAssetRecord is the asset of the legacy onboard answer: id, external_id, site_id, properties.
type LegacyAssetRecord struct {
	ID         string          `json:"id"`
	ExternalID string          `json:"external_id"`
	SiteID     string          `json:"site_id"`
	Properties AssetProperties `json:"properties"`
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
	body, err := decodeJSON(r)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	var req upsertRequest
	if site, ok := f.object(body, []any{"body"}, "site", true); ok {
		req.site = parseSite(f, site, []any{"body", "site"})
	}
	if asset, ok := f.object(body, []any{"body"}, "asset", true); ok {
		req.assets = []assetInput{parseAsset(f, asset, []any{"body", "asset"}, s.Now())}
	}
	var methods []flexv1.DispatchMethod
	if consent, ok := f.object(body, []any{"body"}, "dispatch_consent", true); ok {
		loc := []any{"body", "dispatch_consent"}
		if items, ok := f.array(consent, loc, "dispatch_methods", true); ok {
			for i := range items {
				if m, ok := enum(f, map[string]any{"m": items[i]}, at(loc, "dispatch_methods"), "m", true, allDispatchMethods); ok {
					methods = append(methods, m)
				} else {
					// enum recorded the error at ...dispatch_methods/m; point it at the index.
					f.items[len(f.items)-1].Loc = []any{"body", "dispatch_consent", "dispatch_methods", i}
				}
			}
		}
	}
	if err := f.err(); err != nil {
		return nil, err
	}
	if err := req.site.checkEmail(); err != nil {
		return nil, err
	}
	ctx := r.Context()
	rules, err := controllers.LoadRules(ctx, s.Cache)
	if err != nil {
		return nil, err
	}
	slices.Sort(methods)
	methods = slices.Compact(methods)

	var out LegacyOnboardResponse
	err = s.transact(ctx, func(st store, log *writeLog) error {
		plan, err := planUpsert(ctx, st, p.Namespace, req, rules)
		if err != nil {
			return err
		}
		if plan.siteBefore != nil && !log.wasCreated(plan.site) {
			return fail(http.StatusConflict, "Site with MPAN %s already exists", req.site.MPAN)
		}
		asset := plan.assets[0]
		if asset.before != nil && !log.wasCreated(asset.asset) {
			return fail(http.StatusConflict, "Asset with external_id %q already exists", asset.asset.Spec.ExternalID)
		}
		plan.site.Spec.DispatchMethods = methods
		if slices.Contains(methods, "cm_infrequent_dispatch") {
			plan.site.Spec.Markets = []flexv1.Market{"cm"}
		}
		var props []flexv1.PropositionName
		for _, m := range methods {
			if slices.Contains(flexv1.AllPropositions, flexv1.PropositionName(m)) {
				props = append(props, flexv1.PropositionName(m))
			}
		}
		plan.markInFlight(s.inFlightDeadline(), props...)
		if err := s.applyUpsert(ctx, log, plan); err != nil {
			return err
		}
		for _, m := range methods {
			prop := flexv1.PropositionName(m)
			if !slices.Contains(flexv1.AllPropositions, prop) {
				continue
			}
			e := &flexv1.Enrolment{
				ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: identity.EnrolmentName(plan.site.Name, prop),
					Finalizers: []string{flexv1.Finalizer}},
				Spec: flexv1.EnrolmentSpec{SiteName: plan.site.Name, Proposition: prop},
			}
			if err := s.create(ctx, log, e); err != nil {
				return err
			}
		}
		siteID := plan.siteID()
		out = LegacyOnboardResponse{
			Site: legacySiteRecord(plan.site, []flexv1.Asset{*asset.asset}, false),
			Asset: LegacyAssetRecord{ID: asset.asset.Labels[flexv1.IDLabel], ExternalID: asset.asset.Spec.ExternalID,
				SiteID: siteID, Properties: AssetProperties{PowerKW: asset.asset.Spec.PowerKW, CapacityKWh: asset.asset.Spec.CapacityKWh}},
		}
		return nil
	})
	return out, err
}
