package pricing

import (
	"context"
	"slices"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/index"
)

// HouseholdBatteryPlans are the plans of the batteries of the caller's site with API id
// siteID (an end user's own site, as the hosted flow asks): see BatteryPlansOfSite.
func (s *Service) HouseholdBatteryPlans(ctx context.Context, p *auth.Principal, siteID string) ([]BatteryPlan, error) {
	site, err := s.Households.SiteToRead(ctx, p, siteID)
	if err != nil {
		return nil, err
	}
	return s.BatteryPlansOfSite(ctx, site)
}

// BatteryPlansOfSite are the plans of a site's batteries (the site already found for its
// caller: the rewards page's session names it), in the order of their API ids; none when the
// site is not actively enrolled in full_asset_schedule_control. Each is the plan
// GET …/battery-schedule answers for it.
func (s *Service) BatteryPlansOfSite(ctx context.Context, site *flexv1.Site) ([]BatteryPlan, error) {
	ok, err := s.activelyEnrolled(ctx, site, flexv1.PropositionFullAssetScheduleControl)
	if err != nil || !ok {
		return nil, err
	}
	assets, err := index.NewLookup(s.Households.Cache).AssetsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return nil, err
	}
	assets = slices.DeleteFunc(slices.Clone(assets), func(a *flexv1.Asset) bool {
		return a.Spec.Type != flexv1.AssetTypeBattery || !a.DeletionTimestamp.IsZero() || a.Labels[flexv1.IDLabel] == ""
	})
	slices.SortFunc(assets, func(a, b *flexv1.Asset) int {
		return strings.Compare(a.Labels[flexv1.IDLabel], b.Labels[flexv1.IDLabel])
	})
	now := s.Now()
	out := make([]BatteryPlan, 0, len(assets))
	for _, a := range assets {
		plan, err := s.batteryPlan(ctx, site.Namespace, a.Labels[flexv1.IDLabel], a, now, true)
		if err != nil {
			return nil, err
		}
		out = append(out, plan)
	}
	return out, nil
}
