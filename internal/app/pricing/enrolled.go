package pricing

import (
	"context"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/identity"
)

// activelyEnrolled tells whether the site's enrolment in prop is active (its Enrolment's phase
// Active, not being deleted): the prices and schedules serve only such sites. It reads the
// cache, as every read of a site's children does.
func (s *Service) activelyEnrolled(ctx context.Context, site *flexv1.Site, prop flexv1.PropositionName) (bool, error) {
	active := func(e *flexv1.Enrolment) bool {
		return e.Spec.Proposition == prop && e.DeletionTimestamp.IsZero() && e.Status.Phase == flexv1.EnrolmentActive
	}
	// The Enrolment the API names for it first: one map read instead of the site's bucket of
	// Enrolments (internal/index), which every read of an enrolled site would scan.
	if e := s.namedEnrolment(site, prop); e != nil && e.Spec.SiteName == site.Name && active(e) {
		return true, nil
	}
	enrolments, err := s.enrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return false, err
	}
	for _, e := range enrolments {
		if active(e) {
			return true, nil
		}
	}
	return false, nil
}

// siteEnrolledIn is the caller's site with API id siteID when it is actively enrolled in prop;
// app.ErrSiteNotFound otherwise (an unknown site, another organisation's, or one not on the
// proposition are told alike).
func (s *Service) siteEnrolledIn(ctx context.Context, p *auth.Principal, siteID string,
	prop flexv1.PropositionName) (*flexv1.Site, error) {
	site, err := s.Households.SiteToRead(ctx, p, siteID)
	if err != nil {
		return nil, err
	}
	ok, err := s.activelyEnrolled(ctx, site, prop)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, app.ErrSiteNotFound
	}
	return site, nil
}

// assetEnrolledIn is the caller's asset with API id assetID and its site, when the site is
// actively enrolled in prop; app.ErrAssetNotFound otherwise (an unknown asset, another
// organisation's, or one whose site is not on the proposition are told alike). The asset and
// the site are the cached objects themselves: read-only.
func (s *Service) assetEnrolledIn(ctx context.Context, p *auth.Principal, assetID string,
	prop flexv1.PropositionName) (*flexv1.Asset, *flexv1.Site, error) {
	asset, err := s.Households.AssetToRead(ctx, p, assetID)
	if err != nil {
		return nil, nil, err
	}
	site, err := s.siteByName(ctx, asset.Namespace, asset.Spec.SiteName)
	if err != nil {
		return nil, nil, err
	}
	if site == nil || !site.DeletionTimestamp.IsZero() {
		return nil, nil, app.ErrAssetNotFound
	}
	ok, err := s.activelyEnrolled(ctx, site, prop)
	if err != nil {
		return nil, nil, err
	}
	if !ok {
		return nil, nil, app.ErrAssetNotFound
	}
	return asset, site, nil
}

// marketOf is the market whose prices steer a proposition's schedules: its Proposition's
// spec.market, else its name (a proposition with no Proposition object is not offered, but
// its name is still its market).
func (s *Service) marketOf(ctx context.Context, prop flexv1.PropositionName) (string, error) {
	obj, err := s.proposition(ctx, identity.PropositionObjectName(prop))
	if err != nil {
		return "", err
	}
	if obj == nil {
		return string(prop), nil
	}
	return obj.Spec.MarketOrDefault(), nil
}
