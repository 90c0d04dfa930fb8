package pricing

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/evschedule"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/ocpp"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/schedulestore"
	"github.com/flexsite/flexsite/internal/validation"
)

// The bounds of a plug-in schedule request: prod states none; these keep one request's work
// (and the answer kept for it) small. A day and a half of half-hours fits 48 blocks; a car is
// not plugged in for a schedule longer than two days.
const (
	MaxScheduleBlocks = 48
	MaxScheduleSpan   = 48 * time.Hour
)

// Block is a charging block of prod's ChargingScheduleBlock, read by the door.
type Block struct{ Start, End time.Time }

// ScheduleBlock is prod's ChargingScheduleBlock as answered: RFC 3339 UTC.
type ScheduleBlock struct {
	StartTimestamp string `json:"start_timestamp"`
	EndTimestamp   string `json:"end_timestamp"`
}

// PlugInScheduleResponse is prod's PlugInScheduleEventResponse.
type PlugInScheduleResponse struct {
	ModifiedChargingSchedule []ScheduleBlock `json:"modified_charging_schedule"`
}

// ErrChargerNotFound answers a plug-in schedule for an asset the caller has not, whose site is
// not actively enrolled in price_curve, or that is no charger or EV: prod's 404.
var ErrChargerNotFound = app.Fail(app.NotFound, "Charger not found or not authorized to access")

// ScheduleConsent is the dispatch method a site must have consented to before its charger's
// schedule is steered: prod's documented 403 names limited_pause. (price_curve is a proposition,
// not a dispatch method: a Site's dispatchMethods cannot name it.)
const ScheduleConsent = flexv1.PropositionLimitedPause

// ErrNoScheduleConsent answers a plug-in schedule for a charger whose site's dispatch methods do
// not name limited_pause: prod's 403.
var ErrNoScheduleConsent = app.Fail(app.Forbidden, "Site lacking required limited_pause dispatch consent")

// CheckRequested refuses a request's charging_schedule outside the bounds (422 at the field):
// 1..MaxScheduleBlocks blocks, each ending after it starts, none overlapping another, all within
// MaxScheduleSpan. The door has read each timestamp (RFC 3339 with a zone).
func CheckRequested(blocks []Block) error {
	loc := []any{"body", "charging_schedule"}
	switch {
	case len(blocks) == 0:
		return app.InvalidFields(app.Field("List should have at least 1 item after validation, not 0", "too_short", loc...))
	case len(blocks) > MaxScheduleBlocks:
		return app.InvalidFields(app.Field(fmt.Sprintf("List should have at most %d items after validation, not %d",
			MaxScheduleBlocks, len(blocks)), "too_long", loc...))
	}
	var items []app.FieldError
	for i, b := range blocks {
		if !b.End.After(b.Start) {
			items = append(items, app.Field("end_timestamp should be after start_timestamp", "value_error",
				"body", "charging_schedule", i, "end_timestamp"))
		}
	}
	if len(items) > 0 {
		return app.InvalidFields(items...)
	}
	order := make([]int, len(blocks))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return blocks[a].Start.Compare(blocks[b].Start) })
	for k := 1; k < len(order); k++ {
		prev, cur := blocks[order[k-1]], blocks[order[k]]
		if cur.Start.Before(prev.End) {
			items = append(items, app.Field(fmt.Sprintf("Block overlaps block %d", order[k-1]), "value_error",
				"body", "charging_schedule", order[k], "start_timestamp"))
		}
	}
	if len(items) > 0 {
		return app.InvalidFields(items...)
	}
	first, last := blocks[order[0]].Start, blocks[0].End
	for _, b := range blocks {
		if b.End.After(last) {
			last = b.End
		}
	}
	if last.Sub(first) > MaxScheduleSpan {
		return app.InvalidFields(app.Field(fmt.Sprintf("The schedule should span at most %d hours, from its first start to its last end",
			int(MaxScheduleSpan/time.Hour)), "value_error", loc...))
	}
	return nil
}

// PlugInSchedule answers the charging schedule a charger or EV means to follow with the one
// internal/evschedule's rule chooses, and keeps the answer: 422 for a request outside
// CheckRequested, 404 for an asset the caller has not, whose site is not actively enrolled in
// price_curve, or that is no charger or EV, 403 when the site's dispatch methods do not name
// limited_pause (ScheduleConsent), 503 when the database cannot read the inputs or keep the
// answer (then nothing is answered).
func (s *Service) PlugInSchedule(ctx context.Context, p *auth.Principal, assetID string,
	requested []Block) (PlugInScheduleResponse, error) {
	if err := CheckRequested(requested); err != nil {
		return PlugInScheduleResponse{}, err
	}
	if p == nil || p.Kind != auth.KindOrganisation {
		return PlugInScheduleResponse{}, app.Fail(app.Forbidden, "Plug-in schedules are sent with an organisation's token")
	}
	asset, site, err := s.assetEnrolledIn(ctx, p, assetID, flexv1.PropositionPriceCurve)
	if err != nil {
		if errors.Is(err, app.ErrAssetNotFound) {
			return PlugInScheduleResponse{}, ErrChargerNotFound
		}
		return PlugInScheduleResponse{}, err
	}
	if !dispatch.PlugEvents(asset.Spec.Type) {
		return PlugInScheduleResponse{}, ErrChargerNotFound
	}
	if !dispatch.Consents(site.Spec.DispatchMethods, ScheduleConsent) {
		return PlugInScheduleResponse{}, ErrNoScheduleConsent
	}
	in := evschedule.Input{Requested: make([]evschedule.Block, len(requested))}
	for i, b := range requested {
		in.Requested[i] = evschedule.Block{Start: b.Start.UTC(), End: b.End.UTC()}
	}
	latest, err := s.AssetEvents.Latest(ctx, p.Namespace, []string{assetID})
	if err != nil {
		return PlugInScheduleResponse{}, s.failed(err)
	}
	in.Intent, in.Tariff = scheduleIntent(latest[assetID]), scheduleTariff(latest[assetID])
	start, deadline, _ := evschedule.Window(in)
	market, err := s.marketOf(ctx, flexv1.PropositionPriceCurve)
	if err != nil {
		return PlugInScheduleResponse{}, err
	}
	span, err := s.Prices.Range(ctx, p.Namespace, market, start, deadline, prices.DayOf(start))
	if err != nil {
		return PlugInScheduleResponse{}, s.failed(err)
	}
	in.Prices = span.Prices
	windows, err := s.Dispatches.WindowsOfAsset(ctx, p.Namespace, assetID, start, deadline)
	if err != nil {
		return PlugInScheduleResponse{}, s.failed(err)
	}
	for _, w := range windows {
		if !w.TurnUp() {
			in.TurnDown = append(in.TurnDown, evschedule.Block{Start: w.From, End: w.To})
		}
	}
	plan := evschedule.Plan(in)
	record := schedulestore.EVSchedule{SiteID: site.Labels[flexv1.IDLabel], AssetID: assetID, Requested: storeBlocks(in.Requested),
		Blocks: storeBlocks(plan.Blocks), Changed: plan.Changed, WindowEnd: plan.WindowEnd.UTC(),
		AnsweredAt: s.Now().UTC().Truncate(time.Microsecond), AnsweredBy: p.ClientName}
	if err := s.Schedules.Append(ctx, p.Namespace, record); err != nil {
		return PlugInScheduleResponse{}, s.failed(err)
	}
	out := PlugInScheduleResponse{ModifiedChargingSchedule: make([]ScheduleBlock, len(plan.Blocks))}
	for i, b := range plan.Blocks {
		out.ModifiedChargingSchedule[i] = ScheduleBlock{StartTimestamp: dispatch.Stamp(b.Start), EndTimestamp: dispatch.Stamp(b.End)}
	}
	return out, nil
}

func storeBlocks(bs []evschedule.Block) []schedulestore.Block {
	out := make([]schedulestore.Block, len(bs))
	for i, b := range bs {
		out[i] = schedulestore.Block{Start: b.Start.UTC(), End: b.End.UTC()}
	}
	return out
}

// storedIntent and storedTariff are what the schedule reads of the asset events' stored intent
// and tariff (internal/app/assetevents writes them; a use case does not import another's
// package, so the few JSON names it reads are named here).
type storedIntent struct {
	ReadyBy          string `json:"ready_by"`
	ReadyByLocalTime string `json:"ready_by_local_time"`
	MayChargePeak    bool   `json:"may_charge_peak"`
}

type storedTariff struct {
	OffPeakTimes string `json:"off_peak_times"`
	Timezone     string `json:"timezone"`
}

// scheduleIntent reads the stored latest intent as the rule reads it: ready_by_local_time,
// else (prod's deprecated field, whose wall time is what it means) the wall time ready_by was
// written in. nil without an intent; a stored intent that does not decode is no intent (the
// asset events' route checked it when it was kept).
func scheduleIntent(l asseteventstore.Latest) *evschedule.Intent {
	if len(l.Intent) == 0 {
		return nil
	}
	var stored storedIntent
	if err := json.Unmarshal(l.Intent, &stored); err != nil {
		return nil
	}
	out := &evschedule.Intent{MayChargePeak: stored.MayChargePeak}
	if wall, err := validation.ParseWallTime(stored.ReadyByLocalTime); err == nil {
		out.ReadyBy = &wall
	} else if t, err := validation.ParseAwareTimestamp(stored.ReadyBy); err == nil {
		wall := time.Duration(t.Hour())*time.Hour + time.Duration(t.Minute())*time.Minute + time.Duration(t.Second())*time.Second
		out.ReadyBy = &wall
	}
	return out
}

// scheduleTariff reads the stored latest tariff's off-peak times and zone; nil without one
// (or one that no longer reads: the route checked it when it was kept).
func scheduleTariff(l asseteventstore.Latest) *evschedule.Tariff {
	if len(l.Tariff) == 0 {
		return nil
	}
	var stored storedTariff
	if err := json.Unmarshal(l.Tariff, &stored); err != nil {
		return nil
	}
	ranges, err := validation.ParseOffPeakTimes(stored.OffPeakTimes)
	if err != nil {
		return nil
	}
	zone, err := time.LoadLocation(stored.Timezone)
	if err != nil {
		return nil
	}
	return &evschedule.Tariff{OffPeak: ranges, Zone: zone}
}

// ChargingProfile answers GET /examples/ocpp-charging-profile: prod's example profile, or with
// assetID (Flexsite's extension) the profile of the caller's asset's latest answered plug-in
// schedule whose window has not ended, built by the same builder (internal/ocpp). 404 for an
// asset the caller has not or one without such an answer; 422 at the query for an asset without
// a power rating (a profile's limits are watts: a schedule alone does not say how many).
func (s *Service) ChargingProfile(ctx context.Context, p *auth.Principal, assetID string) (ocpp.SetChargingProfileRequest, error) {
	now := s.Now()
	if assetID == "" {
		return ocpp.Example(now), nil
	}
	if p == nil || p.Kind != auth.KindOrganisation {
		return ocpp.SetChargingProfileRequest{}, app.ErrAssetNotFound
	}
	asset, err := s.Households.FindAsset(ctx, p, assetID, false)
	if err != nil {
		return ocpp.SetChargingProfileRequest{}, err
	}
	site := &flexv1.Site{}
	if err := s.Households.Cache.Get(ctx, client.ObjectKey{Namespace: asset.Namespace, Name: asset.Spec.SiteName}, site); err != nil {
		if apierrors.IsNotFound(err) {
			return ocpp.SetChargingProfileRequest{}, app.ErrAssetNotFound
		}
		return ocpp.SetChargingProfileRequest{}, err
	}
	answer, ok, err := s.Schedules.LatestOfAsset(ctx, p.Namespace, site.Labels[flexv1.IDLabel], assetID, now)
	if err != nil {
		return ocpp.SetChargingProfileRequest{}, s.failed(err)
	}
	if !ok {
		return ocpp.SetChargingProfileRequest{}, ErrNoScheduleAnswered
	}
	powerW, ok := dispatch.PowerW(asset.Spec)
	if !ok {
		return ocpp.SetChargingProfileRequest{}, app.InvalidFields(app.Field(
			"The asset has no power rating (power_w or a custom dispatch power): a charging profile's limits are watts",
			"value_error", "query", "asset_id"))
	}
	return ocpp.Profile(assetID, scheduleOf(answer), powerW), nil
}

// ErrNoScheduleAnswered answers a profile asked for an asset without a plug-in schedule answer
// whose window is still open.
var ErrNoScheduleAnswered = app.Fail(app.NotFound, "No plug-in schedule answered for this asset whose window is still open")

// scheduleOf is a kept answer as the rule answered it: its window starts where the rule starts
// it, from the request (evschedule.Window), and ends where it was kept.
func scheduleOf(e schedulestore.EVSchedule) evschedule.Schedule {
	in := evschedule.Input{Requested: make([]evschedule.Block, len(e.Requested))}
	for i, b := range e.Requested {
		in.Requested[i] = evschedule.Block{Start: b.Start, End: b.End}
	}
	start, _, _ := evschedule.Window(in)
	out := evschedule.Schedule{Blocks: make([]evschedule.Block, len(e.Blocks)), Changed: e.Changed,
		WindowStart: start, WindowEnd: e.WindowEnd}
	for i, b := range e.Blocks {
		out.Blocks[i] = evschedule.Block{Start: b.Start, End: b.End}
	}
	return out
}

// ChargingWindows are the sentences the household's pages show of its car's next charging
// window (household.ChargingWindowSentence), one per charger or EV with an answered plug-in
// schedule still to come, for a site (already found for its caller) actively enrolled in
// price_curve; none otherwise.
func (s *Service) ChargingWindows(ctx context.Context, site *flexv1.Site) ([]string, error) {
	ok, err := s.activelyEnrolled(ctx, site, flexv1.PropositionPriceCurve)
	if err != nil || !ok {
		return nil, err
	}
	now := s.Now()
	answers, err := s.Schedules.LatestOfSite(ctx, site.Namespace, site.Labels[flexv1.IDLabel], now)
	if err != nil {
		return nil, s.failed(err)
	}
	var out []string
	for _, a := range answers {
		blocks := make([]household.ChargingBlock, len(a.Blocks))
		for i, b := range a.Blocks {
			blocks[i] = household.ChargingBlock{Start: b.Start, End: b.End}
		}
		if sentence := household.ChargingWindowSentence(blocks, a.Changed, now); sentence != "" {
			out = append(out, sentence)
		}
	}
	return out, nil
}

// ChargingWindowsForSite is ChargingWindows for the caller's site with API id siteID (an end
// user's own site, as the hosted flow asks).
func (s *Service) ChargingWindowsForSite(ctx context.Context, p *auth.Principal, siteID string) ([]string, error) {
	site, err := s.Households.SiteToRead(ctx, p, siteID)
	if err != nil {
		return nil, err
	}
	return s.ChargingWindows(ctx, site)
}
