package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/settlement"
)

// Pricing reads (issue 36): GET /entities/site/{site_id}/price-curve (answered from memory)
// against the trivial handler answering the same number of bytes, and GET
// /entities/asset/{asset_id}/battery-schedule (which asks the database for the battery's
// dispatches) against the same SQL through the same pool writing the same bytes
// (scenario_batteryraw.go; the same-size trivial handler beside it, without a target), with
// the fleet's sites (10,000 in full mode) actively enrolled in price_curve and
// full_asset_schedule_control and today's and tomorrow's prices declared for both markets.
// The same mirrored passes as the read path (scenario 3), each client walking the fleet's sites
// and batteries in turn, so no per-site cache flatters a figure.

const (
	scenarioPricing = "pricing-reads"
	labelPricing    = "13 pricing reads"
	pricingFigures  = "pricing"

	priceCurveTarget      = "price_curve"
	batteryScheduleTarget = "battery_schedule"
)

func init() {
	scenarioLabels[pricingFigures] = labelPricing
}

// pricedPropositions are the propositions whose routes this scenario reads: every fleet site is
// enrolled in both.
var pricedPropositions = []flexv1.PropositionName{flexv1.PropositionPriceCurve, flexv1.PropositionFullAssetScheduleControl}

// runPricing enrols the fleet in the priced propositions, declares their markets' prices and
// measures the two reads. It runs last of all steps, so the extra enrolments weigh on no other
// figure. Alone (-only pricing-reads) it grows a fleet of its own first, without the scale
// step's figures.
func runPricing(ctx context.Context, b *bench, rep *report) error {
	if b.fleet == nil {
		if err := b.growPlainFleet(ctx); err != nil {
			return err
		}
	}
	sites := b.fleet.siteNames
	ids := b.fleet.siteIDs
	// The fleet: the last scale level's size (the fleet holds more once the onboard
	// and catalogue steps added theirs).
	if n := b.p.ScaleLevels[len(b.p.ScaleLevels)-1]; len(sites) > n {
		sites, ids = sites[:n], ids[:n]
	}
	batteries, err := b.batteryIDs(ctx, b.fleet.ns, sites)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := b.enrolPriced(ctx, b.fleet.ns, sites); err != nil {
		return err
	}
	enrolled := time.Since(start)
	logf("pricing: %d sites actively enrolled in %v in %s", len(sites), pricedPropositions, enrolled.Round(time.Second))
	rep.add(pricingFigures, "enrolled_sites", float64(len(sites)), unitCount)
	rep.add(pricingFigures, "enrol_both_seconds", enrolled.Seconds(), unitSeconds)
	if err := b.declareBenchPrices(ctx); err != nil {
		return err
	}

	trivialURL, err := b.startTrivial(ctx)
	if err != nil {
		return err
	}
	stopTrivial := func() {
		if b.trivial != nil {
			b.trivial.stop()
			b.trivial = nil
		}
	}
	defer stopTrivial()
	api := b.mgr.apiURL
	endpoints := []readTarget{
		{priceCurveTarget, func(i int) string { return api + "/entities/site/" + ids[i%len(ids)] + "/price-curve" }, roleManager},
		{batteryScheduleTarget, func(i int) string {
			return api + "/entities/asset/" + batteries[i%len(batteries)] + "/battery-schedule"
		}, roleManager},
	}
	if err := b.checkPricedAnswers(ctx, endpoints); err != nil {
		return err
	}
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return err
	}
	targets, sizes, err := b.withSameSizeBaselines(ctx, trivialURL, token, endpoints)
	if err != nil {
		return err
	}
	results, err := b.measureMirrored(ctx, targets, token)
	if err != nil {
		return err
	}
	reportPricing(rep, endpoints, sizes, results)
	// The battery schedule asks the database: judged against the same SQL through the same
	// pool (scenario_batteryraw.go), whose server takes the trivial server's place.
	stopTrivial()
	if err := b.measureBatteryAgainstSQL(ctx, rep, b.fleet.ns, batteries, endpoints[1].url, token); err != nil {
		return err
	}
	return b.profileEach(ctx, endpoints, token)
}

// growPlainFleet onboards the last scale level's households when the scale step did not run:
// the same households (a charger and a battery, enrolled in limited_pause), without its probes,
// ledgers or figures.
func (b *bench) growPlainFleet(ctx context.Context) error {
	fleet, err := b.organisation(ctx, "bench-fleet", 10)
	if err != nil {
		return err
	}
	b.fleet = fleet
	n := b.p.ScaleLevels[len(b.p.ScaleLevels)-1]
	t, _, err := b.onboardREST(ctx, fleet, n)
	if err != nil {
		return err
	}
	logf("pricing: a fleet of %d households onboarded in %s (no scale step)", n, t.wall.Round(time.Second))
	_, err = b.mgr.waitIdle(ctx, b.p.Settle)
	return err
}

// batteryIDs are the API ids of the sites' batteries, in the sites' order (one List).
func (b *bench) batteryIDs(ctx context.Context, ns string, sites []string) ([]string, error) {
	assets := &flexv1.AssetList{}
	if err := b.c.List(ctx, assets, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	bySite := map[string]string{}
	for i := range assets.Items {
		a := &assets.Items[i]
		if a.Spec.Type == flexv1.AssetTypeBattery {
			bySite[a.Spec.SiteName] = a.Labels[flexv1.IDLabel]
		}
	}
	ids := make([]string, len(sites))
	for i, s := range sites {
		if ids[i] = bySite[s]; ids[i] == "" {
			return nil, fmt.Errorf("site %s has no battery", s)
		}
	}
	return ids, nil
}

// enrolPriced creates each site's Enrolments in the priced propositions (as the REST API
// creates them, straight through the API server, C at a time) and waits until every one is
// Active: the Enrolment controller decides from the site's eligibility, and the fleet's sites
// are eligible for both as created (a CoP11-qualified charger, and the boundary meter consent
// full_asset_schedule_control requires).
func (b *bench) enrolPriced(ctx context.Context, ns string, sites []string) error {
	n := len(sites) * len(pricedPropositions)
	t, err := runConcurrent(ctx, n, b.p.Concurrency, func(ctx context.Context, i int) error {
		e := newEnrolmentIn(ns, sites[i/len(pricedPropositions)], pricedPropositions[i%len(pricedPropositions)])
		return client.IgnoreAlreadyExists(b.c.Create(ctx, e))
	})
	if err != nil {
		return fmt.Errorf("enrolling the fleet in %v: %w", pricedPropositions, err)
	}
	logf("pricing: %d Enrolments created in %s (%.0f/s)", n, t.wall.Round(time.Millisecond), t.rate())
	want := map[string]bool{}
	for _, s := range sites {
		for _, p := range pricedPropositions {
			want[identity.EnrolmentName(s, p)] = true
		}
	}
	deadline := time.Now().Add(b.p.Settle)
	for {
		if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
			return err
		}
		list := &flexv1.EnrolmentList{}
		if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
			return err
		}
		active, notActive := 0, ""
		for i := range list.Items {
			e := &list.Items[i]
			if !want[e.Name] {
				continue
			}
			if e.Status.Phase == flexv1.EnrolmentActive {
				active++
			} else if notActive == "" {
				notActive = fmt.Sprintf("%s is %q", e.Name, e.Status.Phase)
			}
		}
		if active == len(want) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d priced enrolments active after %s (%s)", active, len(want), b.p.Settle, notActive)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
}

// marketOf is the market of a proposition's prices: its Proposition's spec.market, else its
// name (as the manager reads it).
func (b *bench) marketOf(ctx context.Context, prop flexv1.PropositionName) (string, error) {
	obj := &flexv1.Proposition{}
	if err := b.c.Get(ctx, client.ObjectKey{Name: identity.PropositionObjectName(prop)}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return string(prop), nil
		}
		return "", err
	}
	return obj.Spec.MarketOrDefault(), nil
}

// declareBenchPrices declares today's and tomorrow's UK days of both propositions' markets
// through PUT /market-prices (the fleet's API client holds prices_write): tomorrow declared,
// the curves run to tomorrow's 23:00, the longest horizon, up to 94 periods.
func (b *bench) declareBenchPrices(ctx context.Context) error {
	today := prices.DayOf(time.Now())
	for _, prop := range pricedPropositions {
		market, err := b.marketOf(ctx, prop)
		if err != nil {
			return err
		}
		for _, day := range []prices.Day{today, today.Next()} {
			if err := b.fleet.api.putPrices(ctx, market, day, benchDayPrices(day)); err != nil {
				return err
			}
		}
		logf("pricing: prices of %s and %s declared for market %s", today, today.Next(), market)
	}
	return nil
}

// benchDayPrices is a day-ahead-like day in hundredths of £/MWh: cheap small hours, a dear
// evening peak, one negative period, with ties. Its shape gives the battery rule cycles to find.
func benchDayPrices(day prices.Day) []prices.Price {
	periods := day.Periods()
	out := make([]prices.Price, len(periods))
	for i, start := range periods {
		hour := start.In(settlement.London).Hour()
		c := prices.Centi(5000 + (i*7919)%2000)
		switch {
		case hour < 5:
			c = prices.Centi(2000 + (i%4)*250)
		case hour >= 16 && hour < 19:
			c = prices.Centi(14000 + (i%3)*1000)
		}
		if i == 6 {
			c = -350
		}
		out[i] = prices.Price{Start: start, Centi: c}
	}
	return out
}

// putPrices declares a market's day; 201 (first declared) and 200 (replaced) both succeed.
func (a *apiClient) putPrices(ctx context.Context, market string, day prices.Day, ps []prices.Price) error {
	type price struct {
		Start string          `json:"start_timestamp"`
		Price json.RawMessage `json:"price_gbp_per_mwh"`
	}
	body := struct {
		Prices []price `json:"half_hourly_prices"`
	}{Prices: make([]price, len(ps))}
	for i, p := range ps {
		// The price's own two-decimal text: a JSON number exactly as declared.
		body.Prices[i] = price{Start: p.Start.UTC().Format(time.RFC3339), Price: json.RawMessage(p.Centi.String())}
	}
	return a.call(ctx, http.MethodPut, "/market-prices/"+market+"/"+day.String(), body, nil)
}

// checkPricedAnswers makes sure the first site's curve and battery schedule are real work: a
// curve with declared prices, a schedule with steps.
func (b *bench) checkPricedAnswers(ctx context.Context, endpoints []readTarget) error {
	var curve struct {
		Prices []struct {
			Price *float64 `json:"price_gbp_per_mwh"`
		} `json:"half_hourly_traded_prices"`
	}
	var schedule struct {
		Steps []json.RawMessage `json:"schedule_steps"`
	}
	for _, e := range endpoints {
		var out any = &curve
		if e.name == batteryScheduleTarget {
			out = &schedule
		}
		if err := b.fleet.api.call(ctx, http.MethodGet, e.url(0)[len(b.mgr.apiURL):], nil, out); err != nil {
			return err
		}
	}
	declared := 0
	for _, p := range curve.Prices {
		if p.Price != nil {
			declared++
		}
	}
	if declared == 0 || len(schedule.Steps) == 0 {
		return fmt.Errorf("pricing answers without work: a curve of %d periods (%d priced), a schedule of %d steps",
			len(curve.Prices), declared, len(schedule.Steps))
	}
	logf("pricing: a curve of %d periods (%d priced), a battery schedule of %d steps", len(curve.Prices), declared, len(schedule.Steps))
	return nil
}

// reportPricing reports each route against the trivial handler answering its bytes: the
// issue's ratio (target ≥ 0.7), p99s, and the serving process's CPU time per request.
func reportPricing(rep *report, endpoints []readTarget, sizes map[string]int, results map[string]*readResult) {
	serverCPU := func(name, role string) float64 {
		return results[name].cpuPerCallUS(role)
	}
	for _, tg := range endpoints {
		name, t := tg.name, results[tg.name].t
		sameName := sameSizeName(name)
		same := results[sameName].t
		cpu, sameCPU := serverCPU(name, tg.server), serverCPU(sameName, roleTrivial)
		rep.add(pricingFigures, name+"_answer_bytes", float64(sizes[name]), unitCount)
		rep.add(pricingFigures, name+"_rps", t.rate(), unitPerSec)
		rep.add(pricingFigures, name+"_p50_ms", t.percentileMS(50), unitMS)
		rep.add(pricingFigures, name+"_p99_ms", t.percentileMS(99), unitMS)
		rep.add(pricingFigures, sameName+"_rps", same.rate(), unitPerSec)
		rep.add(pricingFigures, sameName+"_p99_ms", same.percentileMS(99), unitMS)
		// The price curve, answered from memory, is judged against the trivial handler of
		// its size (≥ 0.7); the battery schedule, which asks the database, against the same
		// SQL (measureBatteryAgainstSQL), and this ratio is shown beside it.
		if name == priceCurveTarget {
			rep.addTarget(pricingFigures, name+"_vs_same_size_trivial_ratio", ratio(t.rate(), same.rate()), unitRatio, target{">=", 0.7})
		} else {
			rep.add(pricingFigures, name+"_vs_same_size_trivial_ratio", ratio(t.rate(), same.rate()), unitRatio)
		}
		rep.add(pricingFigures, name+"_p99_vs_same_size_trivial_ratio", ratio(t.percentileMS(99), same.percentileMS(99)), unitRatio)
		rep.add(pricingFigures, name+"_server_cpu_us_per_request", cpu, unitCount)
		rep.add(pricingFigures, sameName+"_server_cpu_us_per_request", sameCPU, unitCount)
		rep.add(pricingFigures, name+"_vs_same_size_trivial_server_cpu_ratio", ratio(cpu, sameCPU), unitRatio)
		// The database's share: PostgreSQL's CPU time per request (its own processes, not
		// the manager's), on the same two cores as everything else.
		rep.add(pricingFigures, name+"_postgres_cpu_us_per_request", serverCPU(name, rolePostgres), unitCount)
		rep.add(pricingFigures, name+"_bench_client_cpu_us_per_request", serverCPU(name, roleBench), unitCount)
		rep.add(pricingFigures, sameName+"_bench_client_cpu_us_per_request", serverCPU(sameName, roleBench), unitCount)
		logf("pricing %s: %.0f/s (p99 %.2f ms, %.0f µs server CPU each, PostgreSQL %.0f µs) against the trivial handler "+
			"answering its %d bytes %.0f/s (p99 %.2f ms, %.0f µs)", name, t.rate(), t.percentileMS(99), cpu,
			serverCPU(name, rolePostgres), sizes[name], same.rate(), same.percentileMS(99), sameCPU)
	}
}
