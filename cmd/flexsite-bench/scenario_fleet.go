package main

import (
	"context"
	"flag"
	"fmt"
	"sort"
	"strings"
	"time"
)

// The fleet step (issues 39 and 49): every per-request figure at two fleet sizes in one run. A
// request whose cost grows with the number of households is a scaling bug whatever its
// absolute figure, and the full run at 10,000 sites takes half an hour; this step shows such
// growth in every quick run. At each of fleetStepSizes it measures, on a settled fleet:
//
//   - the onboard: ScaleProbe REST onboards into the fleet's namespace against as many raw
//     households (the same objects written straight through client-go) into a namespace
//     grown to the same size (fleetRawNamespace), in the onboard comparison's alternating
//     batches (compare); their p50s, and the API server's requests per REST onboard by verb
//     (apiserver_request_total of Flexsite's group, the batches' deltas: every request the
//     onboard caused, the controllers' included), and the API server's CPU over the batches.
//     The API server's CPU per REST onboard ÷ per raw household is the onboard's cost to the
//     API server against the same objects written straight, in a namespace of the same size;
//   - the manager's CPU while idle: no request and no change for idleSeconds, after the
//     manager has gone idle (waitIdle), absolute (ms of CPU a second) and at the larger size ÷
//     at the smaller;
//   - the hot reads: eligibility, a transactions page, the price curve, a battery's schedule
//     (the sites read are enrolled in the priced propositions and the prices declared first,
//     enrolPriced and declareBenchPrices) and the trivial read behind the manager's whole stack
//     of eligibility's size, against the bare trivial handler, in the read path's mirrored
//     passes after every site was read once (warmReads). For each, the manager's CPU time a
//     read and the bytes it allocated a read (go_memstats_alloc_bytes_total deltas ÷ reads);
//     eligibility ÷ the trivial handler and ÷ the trivial read behind the stack.
//
// Growth (the larger size ÷ the smaller) is reported beside each figure. The sizes are the
// fleet namespace's households; the cluster holds the raw namespace's too (and whatever
// earlier steps made), reported as cluster_sites_*.
//
// It is last of the steps: every step before it runs at the mode's usual sizes. When the
// bench's fleet already holds more than fleetStepSizes[0] households (a whole quick run: the
// catalogue and shards steps grew it), the quick step grows an organisation of its own
// (fleetStepNamespace) from nothing. In the full mode the scale step has grown the fleet past
// 10,000 households, so the step is skipped there (the read path step measures at that size)
// unless it runs alone (-only fleet).

// scenarioFleet is the step's name and report key.
const scenarioFleet = "fleet"

// labelFleet is the step's section of the table.
const labelFleet = "15 fleet"

// fleetStepSizes are the two sizes the step measures at: households of the bench's fleet.
var fleetStepSizes = [2]int{1000, 5000}

// fleetGrowthTarget bounds a per-request figure at the larger fleet ÷ at the smaller.
const fleetGrowthTarget = 1.2

// fleetAPICPUTarget bounds the API server's CPU per REST onboard ÷ per raw household.
const fleetAPICPUTarget = 1.5

// fleetStepNamespace is the step's own organisation, when the bench's fleet is already past
// the step's smaller size; fleetStepMPANPrefix its MPANs' first two digits.
const (
	fleetStepNamespace  = "bench-fleet-step"
	fleetStepMPANPrefix = 21
)

// idleSeconds is how long the manager's idle CPU is measured at each size.
const idleSeconds = 10

// fleetReads are the reads measured: the read path step's endpoints, the pricing step's, and
// eligibility's stack baseline (last).
var fleetReads = []string{eligibilityTarget, transactionsTarget, priceCurveTarget, batteryScheduleTarget,
	stackTrivialName(eligibilityTarget)}

// fleetStackRead is eligibility's stack baseline among fleetReads.
var fleetStackRead = fleetReads[len(fleetReads)-1]

// fleetSize is what the step measured at one size.
type fleetSize struct {
	sites, rawSites, cluster int
	probe                    comparison
	// idleCPUMS is the manager's CPU time (ms) a second while idle.
	idleCPUMS float64
	// cpu and alloc are per read (µs, bytes) by read, "trivial" the bare trivial server's CPU.
	cpu, alloc map[string]float64
	// rps are the reads' throughputs, the bare trivial handler's as "trivial".
	rps map[string]float64
}

// fleetStepSizesFlag overrides fleetStepSizes, e.g. "200,400" to try the step quickly.
var fleetStepSizesFlag = flag.String("fleet-step-sizes", "", "The fleet step's two sizes, comma-separated (\"\": 1000,5000).")

func runFleet(ctx context.Context, b *bench, rep *report) error {
	if *fleetStepSizesFlag != "" {
		var a, c int
		if _, err := fmt.Sscanf(*fleetStepSizesFlag, "%d,%d", &a, &c); err != nil || a <= 0 || c <= a {
			return fmt.Errorf("-fleet-step-sizes %q: want two increasing sizes", *fleetStepSizesFlag)
		}
		fleetStepSizes = [2]int{a, c}
	}
	if b.fleet == nil {
		fleet, err := b.organisation(ctx, "bench-fleet", 10)
		if err != nil {
			return err
		}
		b.fleet = fleet
	}
	if n := len(b.fleet.siteIDs); n > fleetStepSizes[0] {
		if b.p.Mode != modeQuick {
			logf("fleet: the fleet already has %d sites, more than %d: skipped (the read path step measured at that size)", n, fleetStepSizes[0])
			return nil
		}
		own, err := b.organisation(ctx, fleetStepNamespace, fleetStepMPANPrefix)
		if err != nil {
			return err
		}
		logf("fleet: the fleet already has %d sites, more than %d: the step grows %s from nothing", n, fleetStepSizes[0], own.ns)
		fleet := b.fleet
		b.fleet = own
		defer func() { b.fleet = fleet }()
	}
	raw, err := b.fleetRawHouseholds(ctx)
	if err != nil {
		return err
	}
	// The priced reads' prices (the pricing step may have declared them already: a declaration
	// replaces the day).
	if err := b.declareBenchPrices(ctx); err != nil {
		return err
	}
	var at [2]fleetSize
	for i, size := range fleetStepSizes {
		enrolled := 0 // the sites already enrolled in the priced propositions
		if i > 0 {
			enrolled = fleetStepSizes[i-1]
		}
		if at[i], err = b.measureFleetAt(ctx, size, enrolled, raw); err != nil {
			return err
		}
	}
	reportFleet(rep, at)
	return nil
}

// measureFleetAt grows both namespaces to size (less the probe, which brings each to size),
// times the probe, measures the idle manager and the reads (readsAt; the fleet's first
// enrolled sites are already enrolled in the priced propositions).
func (b *bench) measureFleetAt(ctx context.Context, size, enrolled int, raw *households) (fleetSize, error) {
	probe := b.p.ScaleProbe
	if err := b.growFleetTo(ctx, size-probe); err != nil {
		return fleetSize{}, err
	}
	// The raw namespace as large as the fleet's (which an earlier step may have grown past
	// size-probe): the two sides of the probe write into namespaces of the same size.
	restSites, err := b.siteCountIn(ctx, b.fleet.ns)
	if err != nil {
		return fleetSize{}, err
	}
	if err := b.growRawTo(ctx, raw, restSites); err != nil {
		return fleetSize{}, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return fleetSize{}, err
	}
	var out fleetSize
	if out.probe, err = b.compare(ctx, b.fleet, raw, probe); err != nil {
		return out, err
	}
	if err := b.writeLedgers(ctx, b.fleet.ns, out.probe.restNames); err != nil {
		return out, err
	}
	if err := b.writeLedgers(ctx, raw.ns, out.probe.rawNames); err != nil {
		return out, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return out, err
	}
	if out.cluster, err = b.siteCount(ctx); err != nil {
		return out, err
	}
	if out.rawSites, err = b.siteCountIn(ctx, raw.ns); err != nil {
		return out, err
	}
	out.sites = len(b.fleet.siteIDs)
	if out.idleCPUMS, err = b.idleCPU(ctx); err != nil {
		return out, err
	}
	logf("fleet at %d sites (raw namespace %d, cluster %d): onboard p50 %.1f ms (raw %.1f ms); requests per REST onboard %s; "+
		"manager idle %.1f ms CPU a second", out.sites, out.rawSites, out.cluster, out.probe.rest.percentileMS(50),
		out.probe.raw.percentileMS(50), out.probe.restReqs.perUnitString(float64(probe)), out.idleCPUMS)
	if err := b.readsAt(ctx, &out, size, enrolled); err != nil {
		return out, err
	}
	return out, nil
}

// growRawTo writes raw households into raw's namespace until it holds n Sites, each with its
// year of rewards, as the fleet's have.
func (b *bench) growRawTo(ctx context.Context, raw *households, n int) error {
	have, err := b.siteCountIn(ctx, raw.ns)
	if err != nil {
		return err
	}
	fill := n - have
	if fill <= 0 {
		return nil
	}
	t, names, err := b.rawHouseholds(ctx, raw, fill)
	if err != nil {
		return err
	}
	logf("fleet raw fill: %d households in %s (%.1f/s)", fill, t.wall.Round(time.Millisecond), t.rate())
	return b.writeLedgers(ctx, raw.ns, names)
}

// idleCPU is the manager's CPU time (ms) a second over idleSeconds with no request and no
// change (the caller has waited for it to be idle).
// It reads the manager's threads' schedstat (nanoseconds), or else its CPU ticks (10 ms:
// 1 ms a second over idleSeconds).
func (b *bench) idleCPU(ctx context.Context) (float64, error) {
	pid := b.mgr.pid()
	sched0, precise := schedCPU(pid)
	cpu0, start := b.readCPU(), time.Now()
	select {
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(idleSeconds * time.Second):
	}
	elapsed := time.Since(start).Seconds()
	if sched1, ok := schedCPU(pid); precise && ok {
		return ms(sched1-sched0) / elapsed, nil
	}
	used := b.readCPU().since(cpu0)
	return ms(used[roleManager]) / elapsed, nil
}

// readsAt loads the reads over the fleet's first size sites, the trivial read behind the
// stack and the bare trivial handler in mirrored passes, and records each one's manager CPU
// and allocations a read, and throughput. It saves a CPU profile of each read at this size
// (cpu-reads-<read>-<size>-sites.pb.gz), to compare with `go tool pprof -diff_base`.
func (b *bench) readsAt(ctx context.Context, out *fleetSize, size, enrolled int) error {
	trivialURL, err := b.startTrivial(ctx)
	if err != nil {
		return err
	}
	defer func() { b.trivial.stop(); b.trivial = nil }()
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return err
	}
	ids, names := b.fleet.siteIDs[:size], b.fleet.siteNames[:size]
	if err := b.checkLedger(ctx, ids[len(ids)-1]); err != nil {
		return err
	}
	// The priced reads need the sites enrolled in their propositions (the first enrolled
	// already are: the smaller size's, at the larger).
	start := time.Now()
	if err := b.enrolPriced(ctx, b.fleet.ns, names[enrolled:]); err != nil {
		return err
	}
	logf("fleet at %d sites: sites %d to %d actively enrolled in %v in %s", size, enrolled+1, size, pricedPropositions,
		time.Since(start).Round(time.Second))
	batteries, err := b.batteryIDs(ctx, b.fleet.ns, names)
	if err != nil {
		return err
	}
	api := b.mgr.apiURL
	endpoints := append(readEndpoints(api, ids),
		readTarget{priceCurveTarget, func(i int) string { return api + "/entities/site/" + ids[i%len(ids)] + "/price-curve" }, roleManager},
		readTarget{batteryScheduleTarget, func(i int) string {
			return api + "/entities/asset/" + batteries[i%len(batteries)] + "/battery-schedule"
		}, roleManager})
	if err := b.checkPricedAnswers(ctx, endpoints[2:]); err != nil {
		return err
	}
	eligibilityBytes, err := getCounting(ctx, b.http, endpoints[0].url(0), token)
	if err != nil {
		return err
	}
	targets := append([]readTarget{{"trivial", func(int) string { return trivialURL }, roleTrivial}}, endpoints...)
	targets = append(targets, b.stackBaseline(eligibilityTarget, int(eligibilityBytes)))
	if err := b.warmReads(ctx, endpoints, len(ids), token); err != nil {
		return err
	}
	results, err := b.measureMirrored(ctx, targets, token)
	if err != nil {
		return err
	}
	out.cpu, out.alloc, out.rps = map[string]float64{}, map[string]float64{}, map[string]float64{}
	for _, t := range targets {
		r := results[t.name]
		out.cpu[t.name] = r.cpuPerCallUS(t.server)
		out.rps[t.name] = r.t.rate()
		if t.server == roleManager {
			out.alloc[t.name] = r.allocPerCall()
		}
	}
	for _, name := range fleetReads {
		logf("fleet at %d sites: %s: manager CPU %.0f µs and %.0f bytes allocated a read", size, name, out.cpu[name], out.alloc[name])
	}
	logf("fleet at %d sites: the bare trivial handler's CPU %.0f µs a request", size, out.cpu["trivial"])
	for _, e := range endpoints {
		e.name = fmt.Sprintf("%s-%d-sites", e.name, size)
		if err := b.profileReads(ctx, e, token); err != nil {
			return err
		}
	}
	return nil
}

// fleetSizeKeys name the two sizes' figures.
var fleetSizeKeys = [2]string{"small", "large"}

// reportFleet reports every per-request figure at both sizes and its growth.
func reportFleet(rep *report, at [2]fleetSize) {
	for i, k := range fleetSizeKeys {
		rep.add(scenarioFleet, "fleet_sites_"+k, float64(at[i].sites), unitCount)
		rep.add(scenarioFleet, "raw_namespace_sites_"+k, float64(at[i].rawSites), unitCount)
		rep.add(scenarioFleet, "cluster_sites_"+k, float64(at[i].cluster), unitCount)
	}
	// The onboard: p50s, and their growth against the raw writes' in a namespace of the same
	// size.
	restP50 := [2]float64{at[0].probe.rest.percentileMS(50), at[1].probe.rest.percentileMS(50)}
	rawP50 := [2]float64{at[0].probe.raw.percentileMS(50), at[1].probe.raw.percentileMS(50)}
	for i, k := range fleetSizeKeys {
		rep.add(scenarioFleet, "onboard_p50_ms_"+k, restP50[i], unitMS)
		rep.add(scenarioFleet, "raw_onboard_p50_ms_"+k, rawP50[i], unitMS)
	}
	restGrowth, rawGrowth := ratio(restP50[1], restP50[0]), ratio(rawP50[1], rawP50[0])
	rep.addTarget(scenarioFleet, "onboard_p50_growth_ratio", restGrowth, unitRatio, target{"<=", fleetGrowthTarget})
	rep.add(scenarioFleet, "raw_onboard_p50_growth_ratio", rawGrowth, unitRatio)
	rep.add(scenarioFleet, "onboard_p50_growth_vs_raw_growth_ratio", ratio(restGrowth, rawGrowth), unitRatio)
	reportFleetRequests(rep, at)
	// The API server's CPU per REST onboard against per raw household, over the same batches.
	var apiCPU, rawAPICPU [2]float64
	for i, k := range fleetSizeKeys {
		p := at[i].probe
		apiCPU[i] = p.restCPU.perUnitMS(float64(len(p.rest.durations)))[roleAPIServer]
		rawAPICPU[i] = p.rawCPU.perUnitMS(float64(len(p.raw.durations)))[roleAPIServer]
		rep.add(scenarioFleet, "apiserver_cpu_ms_per_onboard_"+k, apiCPU[i], unitMS)
		rep.add(scenarioFleet, "apiserver_cpu_ms_per_raw_household_"+k, rawAPICPU[i], unitMS)
	}
	rep.add(scenarioFleet, "apiserver_cpu_per_onboard_vs_raw_ratio_small", ratio(apiCPU[0], rawAPICPU[0]), unitRatio)
	rep.addTarget(scenarioFleet, "apiserver_cpu_per_onboard_vs_raw_ratio_large", ratio(apiCPU[1], rawAPICPU[1]), unitRatio,
		target{"<=", fleetAPICPUTarget})
	rep.add(scenarioFleet, "apiserver_cpu_per_onboard_growth_ratio", ratio(apiCPU[1], apiCPU[0]), unitRatio)
	// The idle manager.
	for i, k := range fleetSizeKeys {
		rep.add(scenarioFleet, "manager_idle_cpu_ms_per_second_"+k, at[i].idleCPUMS, unitMS)
	}
	rep.addTarget(scenarioFleet, "manager_idle_cpu_growth_ratio", ratio(at[1].idleCPUMS, at[0].idleCPUMS), unitRatio,
		target{"<=", fleetGrowthTarget})
	// The reads.
	for i, k := range fleetSizeKeys {
		rep.add(scenarioFleet, "trivial_server_cpu_us_"+k, at[i].cpu["trivial"], unitCount)
	}
	trivialGrowth := ratio(at[1].cpu["trivial"], at[0].cpu["trivial"])
	for _, name := range fleetReads {
		for i, k := range fleetSizeKeys {
			rep.add(scenarioFleet, name+"_server_cpu_us_"+k, at[i].cpu[name], unitCount)
			rep.add(scenarioFleet, name+"_alloc_bytes_per_read_"+k, at[i].alloc[name], unitCount)
		}
		growth := ratio(at[1].cpu[name], at[0].cpu[name])
		if name == fleetStackRead {
			rep.add(scenarioFleet, name+"_cpu_per_read_growth_ratio", growth, unitRatio)
		} else {
			rep.addTarget(scenarioFleet, name+"_cpu_per_read_growth_ratio", growth, unitRatio, target{"<=", fleetGrowthTarget})
		}
		rep.add(scenarioFleet, name+"_cpu_per_read_growth_vs_trivial_ratio", ratio(growth, trivialGrowth), unitRatio)
		// Reported, not bounded: a hot read allocates the same at both sizes, and a figure above
		// 1 says what grows (the step's allocation profiles at each size show where).
		rep.add(scenarioFleet, name+"_alloc_per_read_growth_ratio", ratio(at[1].alloc[name], at[0].alloc[name]), unitRatio)
		logf("fleet: %s %.0f → %.0f µs of manager CPU and %.0f → %.0f bytes allocated a read, %d → %d sites: growth %.2f",
			name, at[0].cpu[name], at[1].cpu[name], at[0].alloc[name], at[1].alloc[name], at[0].sites, at[1].sites, growth)
	}
	// Eligibility against its two baselines at each size.
	stack := stackTrivialName(eligibilityTarget)
	for i, k := range fleetSizeKeys {
		r := at[i].rps
		rep.add(scenarioFleet, "eligibility_vs_trivial_ratio_"+k, ratio(r[eligibilityTarget], r["trivial"]), unitRatio)
		rep.add(scenarioFleet, "stack_vs_bare_trivial_ratio_"+k, ratio(r[stack], r["trivial"]), unitRatio)
		rep.add(scenarioFleet, "eligibility_own_work_vs_stack_trivial_ratio_"+k, ratio(r[eligibilityTarget], r[stack]), unitRatio)
		rep.add(scenarioFleet, "eligibility_own_server_cpu_us_"+k, at[i].cpu[eligibilityTarget]-at[i].cpu[stack], unitCount)
	}
}

// reportFleetRequests reports the API server's requests per REST onboard by verb at both
// sizes (and every series in the details), their growth, and the LISTs.
func reportFleetRequests(rep *report, at [2]fleetSize) {
	var totals [2]float64
	var byVerb [2]map[string]float64
	verbs := map[string]bool{}
	for i, k := range fleetSizeKeys {
		n := float64(len(at[i].probe.rest.durations))
		byVerb[i] = map[string]float64{}
		for key, v := range at[i].probe.restReqs {
			byVerb[i][key.Verb] += v / n
			verbs[key.Verb] = true
		}
		totals[i] = at[i].probe.restReqs.total() / n
		rep.add(scenarioFleet, "api_requests_per_onboard_"+k, totals[i], unitCount)
		rep.detail("fleet_rest_requests_per_onboard_"+k, at[i].probe.restReqs.perUnit(n))
		rep.detail("fleet_raw_requests_per_household_"+k, at[i].probe.rawReqs.perUnit(float64(len(at[i].probe.raw.durations))))
	}
	names := make([]string, 0, len(verbs))
	for v := range verbs {
		names = append(names, v)
	}
	sort.Strings(names)
	for _, v := range names {
		if v == "LIST" {
			continue // below, with its target
		}
		for i, k := range fleetSizeKeys {
			rep.add(scenarioFleet, "api_verb_"+strings.ToLower(v)+"_per_onboard_"+k, byVerb[i][v], unitCount)
		}
		rep.add(scenarioFleet, "api_verb_"+strings.ToLower(v)+"_per_onboard_growth_ratio", ratio(byVerb[1][v], byVerb[0][v]), unitRatio)
	}
	for i, k := range fleetSizeKeys {
		rep.addTarget(scenarioFleet, "api_list_per_onboard_"+k, byVerb[i]["LIST"], unitCount, target{"==", 0})
	}
	rep.addTarget(scenarioFleet, "api_requests_per_onboard_growth_ratio", ratio(totals[1], totals[0]), unitRatio,
		target{"<=", 1})
}

// growFleetTo onboards households into the fleet until it holds size of them, credits each
// new one its year of rewards and waits for the manager to be idle (every status and ledger
// summary written), so that the reads that follow meet a settled fleet.
func (b *bench) growFleetTo(ctx context.Context, size int) error {
	fill := size - len(b.fleet.siteIDs)
	if fill <= 0 {
		return nil
	}
	if err := b.fillFleet(ctx, fill); err != nil {
		return err
	}
	_, err := b.mgr.waitIdle(ctx, b.p.Settle)
	return err
}
