package pricing

import (
	"context"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/batteryschedule"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/prices"
)

// BatteryScheduleResponse is prod's BatteryScheduleResponse.
type BatteryScheduleResponse struct {
	ScheduleSteps       []BatteryScheduleStep `json:"schedule_steps"`
	ScheduleLastUpdated time.Time             `json:"schedule_last_updated"`
}

// BatteryScheduleStep is prod's BatteryScheduleStep: the rule's step itself (times in UTC).
type BatteryScheduleStep = batteryschedule.Step

// BatteryPlan is a battery's schedule with what it was computed from: the steps, the horizon's
// prices (for a chart) and when its inputs last changed.
type BatteryPlan struct {
	AssetID     string
	Steps       []batteryschedule.Step
	Prices      []prices.Period
	LastUpdated time.Time
}

// Response is the plan as prod's BatteryScheduleResponse: its steps themselves, not a copy
// (the battery schedule is a hot read; Plan's steps are in UTC already).
func (b BatteryPlan) Response() BatteryScheduleResponse {
	steps := b.Steps
	if steps == nil {
		steps = []BatteryScheduleStep{} // [], not null
	}
	return BatteryScheduleResponse{ScheduleSteps: steps, ScheduleLastUpdated: b.LastUpdated.UTC()}
}

// BatterySchedule answers GET /entities/asset/{asset_id}/battery-schedule: the schedule of the
// caller's battery whose site is actively enrolled in full_asset_schedule_control
// (internal/batteryschedule's rule). Any other asset — not a battery, unknown, another
// organisation's, or on a site not actively enrolled — is app.ErrAssetNotFound alike.
func (s *Service) BatterySchedule(ctx context.Context, p *auth.Principal, assetID string) (BatteryScheduleResponse, error) {
	asset, _, err := s.assetEnrolledIn(ctx, p, assetID, flexv1.PropositionFullAssetScheduleControl)
	if err != nil {
		return BatteryScheduleResponse{}, err
	}
	if asset.Spec.Type != flexv1.AssetTypeBattery {
		return BatteryScheduleResponse{}, app.ErrAssetNotFound
	}
	// The REST answer has no chart: the horizon's curve is not built.
	plan, err := s.batteryPlan(ctx, p.Namespace, assetID, asset, s.Now(), false)
	if err != nil {
		return BatteryScheduleResponse{}, err
	}
	return plan.Response(), nil
}

// batteryPlan computes a battery's plan at now. Its prices are those of the market of its
// proposition (full_asset_schedule_control's spec.market, else "full_asset_schedule_control"),
// over the price curve's horizon; its dispatches are those that stand over that horizon.
//
// The horizon's prices are the kept ones when kept (priceCache); the curve for a chart
// (Prices) is built only withCurve.
//
// LastUpdated is when the plan's inputs last changed: the latest of the horizon's prices'
// declaration, the dispatches' last change, and the asset's creation. The asset's later spec
// edits are not counted: the cache strips managedFields, the only record of when a spec
// changed, and an Asset keeps no such time of its own.
func (s *Service) batteryPlan(ctx context.Context, organisation, assetID string, asset *flexv1.Asset,
	now time.Time, withCurve bool) (BatteryPlan, error) {
	market, err := s.marketOf(ctx, flexv1.PropositionFullAssetScheduleControl)
	if err != nil {
		return BatteryPlan{}, err
	}
	kept, _, err := s.horizonPrices(ctx, organisation, market, now)
	if err != nil {
		return BatteryPlan{}, err
	}
	span := kept.span
	from, to := prices.Horizon(now, span.DayDeclared)
	windows, err := s.Dispatches.WindowsOfAsset(ctx, organisation, assetID, from, to)
	if err != nil {
		return BatteryPlan{}, s.failed(err)
	}
	in := batteryschedule.Input{From: from, To: to, Prices: pricesIn(span.Prices, from, to)}
	if asset.Spec.CapacityWh != nil {
		in.CapacityWh = *asset.Spec.CapacityWh
	}
	in.PowerW, _ = dispatch.PowerW(asset.Spec)
	last := asset.CreationTimestamp.Time
	if span.LastChanged.After(last) {
		last = span.LastChanged
	}
	if len(windows) > 0 {
		in.Dispatches = make([]batteryschedule.Dispatch, 0, len(windows))
	}
	for _, w := range windows {
		in.Dispatches = append(in.Dispatches, batteryschedule.Dispatch{Start: w.From, End: w.To, TurnUp: w.TurnUp()})
		if w.Changed.After(last) {
			last = w.Changed
		}
	}
	plan := BatteryPlan{AssetID: assetID, Steps: batteryschedule.Plan(in), LastUpdated: last.UTC()}
	if withCurve {
		plan.Prices = prices.Curve(from, to, in.Prices)
	}
	return plan, nil
}

// pricesIn are the prices of ps (in period order) that start in [from, to): a window of ps
// itself, without a copy (ps may be the kept prices: read-only; the window's capacity ends
// with it, so an append copies).
func pricesIn(ps []prices.Price, from, to time.Time) []prices.Price {
	i := 0
	for i < len(ps) && ps[i].Start.Before(from) {
		i++
	}
	j := i
	for j < len(ps) && ps[j].Start.Before(to) {
		j++
	}
	return ps[i:j:j]
}
