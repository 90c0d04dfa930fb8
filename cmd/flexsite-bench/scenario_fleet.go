package main

import (
	"context"
	"fmt"
)

// The fleet step (issue 39): the read path's cost per read at two fleet sizes in one run. A
// read whose cost grows with the number of households is a scaling bug whatever its absolute
// figure, and the full run at 10,000 sites takes half an hour; this step shows such growth in
// every quick run. It reads at fleetStepSizes[0] sites, grows the fleet (REST onboards and a year
// of rewards each, as the scale step does) to fleetStepSizes[1], reads again, and reports the
// manager's CPU time per read at the larger size ÷ at the smaller, for each read. The reads
// walk every site of the fleet in turn, as the read path step does, after reading each site
// once (warmReads: the reads measured are hot, as the targets are), so a kept answer
// or page that only the smaller fleet fits in shows as growth.
//
// It is last of the steps: every step before it runs at the mode's usual sizes. In the full
// mode the scale step has already grown the fleet past fleetStepSizes[0], so the step is skipped
// there (the read path step measures at 10,000 sites) unless it runs alone (-only fleet).

// scenarioFleet is the step's name and report key.
const scenarioFleet = "fleet"

// labelFleet is the step's section of the table.
const labelFleet = "15 fleet"

// fleetStepSizes are the two sizes the step reads at: households of the bench's fleet.
var fleetStepSizes = [2]int{1000, 5000}

// fleetGrowthTarget bounds the CPU a read costs at the larger fleet ÷ at the smaller.
const fleetGrowthTarget = 1.2

// fleetReads are the two reads measured: the same endpoints as the read path step.
var fleetReads = []string{eligibilityTarget, transactionsTarget}

func runFleet(ctx context.Context, b *bench, rep *report) error {
	if b.fleet == nil {
		fleet, err := b.organisation(ctx, "bench-fleet", 10)
		if err != nil {
			return err
		}
		b.fleet = fleet
	}
	if n := len(b.fleet.siteIDs); n > fleetStepSizes[0] {
		logf("fleet: the fleet already has %d sites, more than %d: skipped (the read path step measured at that size)", n, fleetStepSizes[0])
		return nil
	}
	trivialURL, err := b.startTrivial(ctx)
	if err != nil {
		return err
	}
	defer func() { b.trivial.stop(); b.trivial = nil }()
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return err
	}
	var perRead [2]map[string]float64
	var clusterSites [2]int
	for i, size := range fleetStepSizes {
		if err := b.growFleetTo(ctx, size); err != nil {
			return err
		}
		if clusterSites[i], err = b.siteCount(ctx); err != nil {
			return err
		}
		if perRead[i], err = b.readCostAt(ctx, size, trivialURL, token); err != nil {
			return err
		}
	}
	reportFleet(rep, clusterSites, perRead)
	return nil
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

// readCostAt loads the two reads over the fleet's first size sites and the trivial handler in
// mirrored passes, and returns the manager's CPU time per read (µs) of each, and the trivial
// server's per request as "trivial". It saves a CPU profile of each read at this size
// (cpu-reads-<read>-<size>-sites.pb.gz), to compare with `go tool pprof -diff_base`.
func (b *bench) readCostAt(ctx context.Context, size int, trivialURL, token string) (map[string]float64, error) {
	ids := b.fleet.siteIDs[:size]
	if err := b.checkLedger(ctx, ids[len(ids)-1]); err != nil {
		return nil, err
	}
	endpoints := readEndpoints(b.mgr.apiURL, ids)
	targets := append([]readTarget{{"trivial", func(int) string { return trivialURL }, roleTrivial}}, endpoints...)
	if err := b.warmReads(ctx, endpoints, len(ids), token); err != nil {
		return nil, err
	}
	results, err := b.measureMirrored(ctx, targets, token)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, t := range targets {
		out[t.name] = results[t.name].cpuPerCallUS(t.server)
	}
	logf("fleet at %d sites: eligibility %.0f µs, transactions %.0f µs of manager CPU a read (trivial %.0f µs)",
		size, out[eligibilityTarget], out[transactionsTarget], out["trivial"])
	for _, e := range endpoints {
		e.name = fmt.Sprintf("%s-%d-sites", e.name, size)
		if err := b.profileReads(ctx, e, token); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// reportFleet reports each read's CPU per read at both sizes and its growth: plainly (the
// issue's figure), and against the trivial handler's own cost at each size, which takes out
// what the machine's load did to every process between the two measurements.
func reportFleet(rep *report, clusterSites [2]int, perRead [2]map[string]float64) {
	small, large := perRead[0], perRead[1]
	rep.add(scenarioFleet, "fleet_sites_small", float64(fleetStepSizes[0]), unitCount)
	rep.add(scenarioFleet, "fleet_sites_large", float64(fleetStepSizes[1]), unitCount)
	rep.add(scenarioFleet, "cluster_sites_small", float64(clusterSites[0]), unitCount)
	rep.add(scenarioFleet, "cluster_sites_large", float64(clusterSites[1]), unitCount)
	rep.add(scenarioFleet, "trivial_server_cpu_us_small", small["trivial"], unitCount)
	rep.add(scenarioFleet, "trivial_server_cpu_us_large", large["trivial"], unitCount)
	for _, name := range fleetReads {
		growth := ratio(large[name], small[name])
		rep.add(scenarioFleet, name+"_server_cpu_us_small", small[name], unitCount)
		rep.add(scenarioFleet, name+"_server_cpu_us_large", large[name], unitCount)
		rep.addTarget(scenarioFleet, name+"_cpu_per_read_growth_ratio", growth, unitRatio, target{"<=", fleetGrowthTarget})
		rep.add(scenarioFleet, name+"_cpu_per_read_growth_vs_trivial_ratio",
			ratio(growth, ratio(large["trivial"], small["trivial"])), unitRatio)
		logf("fleet: %s %.0f → %.0f µs of manager CPU a read, %d → %d sites: growth %.2f",
			name, small[name], large[name], fleetStepSizes[0], fleetStepSizes[1], growth)
	}
}
