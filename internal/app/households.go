package app

import (
	"context"
	"errors"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/householdstore"
	"github.com/flexsite/flexsite/internal/metrics"
	"github.com/flexsite/flexsite/internal/units"
	"github.com/flexsite/flexsite/internal/validation"
)

// MaxAssetsPerCall bounds the assets of one onboard or initialise: what a Site's status holds.
const MaxAssetsPerCall = flexv1.MaxSiteAssets

// UpsertInput is what initialise stores: a site and its assets, read and validated by a door.
type UpsertInput struct {
	Site   SiteInput
	Assets []AssetInput
}

// OnboardInput is an onboard request: a site and its assets, and the proposition to enrol it in.
type OnboardInput struct {
	UpsertInput
	Proposition flexv1.PropositionName
	// Override re-enrols a household that withdrew from the proposition.
	Override bool
}

// LegacyOnboardInput is the deprecated onboard: one site, one asset, and the dispatch methods
// the household consents to.
type LegacyOnboardInput struct {
	Site            SiteInput
	Asset           AssetInput
	DispatchMethods []flexv1.DispatchMethod
}

// OnboardResponse answers onboard.
type OnboardResponse struct {
	Site      UpsertSiteResult    `json:"site"`
	Assets    []UpsertAssetResult `json:"assets"`
	Enrolment EnrolResult         `json:"enrolment"`
}

// InitialiseResponse answers initialise.
type InitialiseResponse struct {
	Site        UpsertSiteResult    `json:"site"`
	Assets      []UpsertAssetResult `json:"assets"`
	Eligibility *EligibilityRecord  `json:"eligibility"`
}

// checkEmail refuses an invalid site email as a bad request (not a field error), as the
// production service does.
func (in SiteInput) checkEmail() error {
	if in.Email == nil || *in.Email == "" {
		return nil
	}
	if err := validation.ValidateEmail(*in.Email); err != nil {
		return Fail(BadRequest, "Invalid email address: %s", err.Error())
	}
	return nil
}

// Onboard upserts the site and its assets and enrols the site in the proposition, atomically:
// a refusal (or any failure) leaves nothing written.
func (s *Service) Onboard(ctx context.Context, p *auth.Principal, in OnboardInput) (_ OnboardResponse, err error) {
	var out OnboardResponse
	defer func() { metrics.Onboards.WithLabelValues(outcome(out.Enrolment.Status, err)).Inc() }()
	if err := in.Site.checkEmail(); err != nil {
		return out, err
	}
	rules, err := householdstore.LoadRules(ctx, s.Cache)
	if err != nil {
		return out, err
	}
	req := upsertRequest{site: in.Site, assets: in.Assets}
	prop, override := in.Proposition, in.Override
	err = s.transact(ctx, func(st store, log *writeLog) error {
		var existing *flexv1.Enrolment
		plan, err := s.writeUpsert(ctx, st, log, p.Namespace, req, rules, func(plan *upsertPlan) error {
			if err := s.confirmFresh(ctx, st, plan.siteBefore); err != nil {
				return err
			}
			var err error
			existing, err = s.decideEnrolment(ctx, st, log, plan, prop, override, rules)
			return err
		}, prop)
		if err != nil {
			return err
		}
		status, err := s.ensureEnrolment(ctx, log, plan.site, existing, prop, override)
		if err != nil {
			return err
		}
		out = OnboardResponse{Site: siteResult(plan, log), Assets: assetResults(plan, log),
			Enrolment: EnrolResult{SiteID: plan.siteID(), Status: status}}
		return nil
	})
	return out, err
}

// Initialise upserts the site and its assets and answers the site's eligibility; it enrols
// nothing.
func (s *Service) Initialise(ctx context.Context, p *auth.Principal, in UpsertInput) (InitialiseResponse, error) {
	if err := in.Site.checkEmail(); err != nil {
		return InitialiseResponse{}, err
	}
	rules, err := householdstore.LoadRules(ctx, s.Cache)
	if err != nil {
		return InitialiseResponse{}, err
	}
	req := upsertRequest{site: in.Site, assets: in.Assets}
	var out InitialiseResponse
	err = s.transact(ctx, func(st store, log *writeLog) error {
		plan, err := s.writeUpsert(ctx, st, log, p.Namespace, req, rules, nil)
		if err != nil {
			return err
		}
		out = InitialiseResponse{Site: siteResult(plan, log), Assets: assetResults(plan, log),
			Eligibility: eligibilityRecord(plan.siteID(), plan.eligibility(rules))}
		return nil
	})
	return out, err
}

func siteResult(plan *upsertPlan, log *writeLog) UpsertSiteResult {
	return UpsertSiteResult{SiteID: plan.siteID(), SiteCreated: log.wasCreated(plan.site),
		FieldsUpdated: log.fieldsOf(plan.site), Warnings: []string{}}
}

func assetResults(plan *upsertPlan, log *writeLog) []UpsertAssetResult {
	out := make([]UpsertAssetResult, 0, len(plan.assets))
	for _, ap := range plan.assets {
		out = append(out, UpsertAssetResult{AssetID: ap.asset.Labels[flexv1.IDLabel], ExternalID: ap.asset.Spec.ExternalID,
			AssetCreated: log.wasCreated(ap.asset), FieldsUpdated: log.fieldsOf(ap.asset), Warnings: []string{}})
	}
	return out
}

// LegacyAssetRecord is the asset of the legacy onboard answer: id, external_id, type, site_id,
// properties.
type LegacyAssetRecord struct {
	ID         string           `json:"id"`
	ExternalID string           `json:"external_id"`
	Type       flexv1.AssetType `json:"type"`
	SiteID     string           `json:"site_id"`
	Properties AssetProperties  `json:"properties"`
}

// LegacyOnboardResponse answers the deprecated onboard.
type LegacyOnboardResponse struct {
	Site  LegacySiteRecord  `json:"site"`
	Asset LegacyAssetRecord `json:"asset"`
}

// LegacyOnboard creates one site and one asset, records the dispatch consent and enrols the
// site in the propositions among the dispatch methods. Unlike onboard it is not an upsert:
// an existing site or asset is a conflict. Enrolment is declarative here (the Enrolment's
// status says whether it is active), as the deprecated endpoint never checked eligibility.
func (s *Service) LegacyOnboard(ctx context.Context, p *auth.Principal, in LegacyOnboardInput) (LegacyOnboardResponse, error) {
	if err := in.Site.checkEmail(); err != nil {
		return LegacyOnboardResponse{}, err
	}
	rules, err := householdstore.LoadRules(ctx, s.Cache)
	if err != nil {
		return LegacyOnboardResponse{}, err
	}
	req := upsertRequest{site: in.Site, assets: []AssetInput{in.Asset}}
	methods := slices.Clone(in.DispatchMethods)
	slices.Sort(methods)
	methods = slices.Compact(methods)
	var props []flexv1.PropositionName // the dispatch methods that are propositions
	for _, m := range methods {
		if slices.Contains(flexv1.AllPropositions, flexv1.PropositionName(m)) {
			props = append(props, flexv1.PropositionName(m))
		}
	}

	var out LegacyOnboardResponse
	err = s.transact(ctx, func(st store, log *writeLog) error {
		plan, err := s.writeUpsert(ctx, st, log, p.Namespace, req, rules, func(plan *upsertPlan) error {
			if err := siteExists(plan, log, req.site.MPAN); err != nil {
				return err
			}
			if a := plan.assets[0]; a.before != nil && !log.wasCreated(a.asset) {
				return Fail(Conflict, "Asset with external_id %q already exists", a.asset.Spec.ExternalID)
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
			Site: legacySiteRecord(p, plan.site, []flexv1.Asset{*asset}, false),
			Asset: LegacyAssetRecord{ID: asset.Labels[flexv1.IDLabel], ExternalID: asset.Spec.ExternalID,
				Type:   asset.Spec.Type,
				SiteID: plan.siteID(), Properties: AssetProperties{PowerKW: units.ToKilo(asset.Spec.PowerW),
					CapacityKWh: units.ToKilo(asset.Spec.CapacityWh)}},
		}
		return nil
	})
	return out, err
}

// RedirectURI checks a redirect_uri the caller names by validation.RedirectURI, with the private-use
// schemes its API client declares (one cached Get, only when one is named): 422 saying why.
func RedirectURI(ctx context.Context, cache client.Reader, p *auth.Principal, raw string) (string, error) {
	norm, err := validation.RedirectURI(raw, nil)
	if validation.NeedsAppSchemes(err) {
		cl := &flexv1.APIClient{}
		if err := cache.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.ClientName}, cl); client.IgnoreNotFound(err) != nil {
			return "", err
		}
		norm, err = validation.RedirectURI(raw, cl.Spec.RedirectSchemes)
	}
	if v := (*validation.Error)(nil); errors.As(err, &v) {
		return "", InvalidFields(Field(v.Msg, v.Type, "query", "redirect_uri"))
	}
	return norm, err
}
