package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/eligibility"
)

// shardsFanout is one timed catalogue change with n shards.
type shardsFanout struct {
	shards  int
	changed int
	took    time.Duration
	// cpu is every process's CPU time by role over the change ("manager" is the shards' sum).
	cpu cpuTimes
	// shardCPU is each shard's own CPU time over the change.
	shardCPU map[string]time.Duration
}

func (f shardsFanout) rate() float64 { return ratio(float64(f.changed), f.took.Seconds()) }

// apiCores is the cores the API server and etcd used on average over the fan-out.
func (f shardsFanout) apiCores() float64 {
	return ratio((f.cpu[roleAPIServer] + f.cpu[roleEtcd]).Seconds(), f.took.Seconds())
}

func (f shardsFanout) shardCPUSeconds() map[string]float64 {
	out := map[string]float64{}
	for n, d := range f.shardCPU {
		out[n] = round3(d.Seconds())
	}
	return out
}

// busiestShardCPU is the CPU time of the shard that spent most.
func (f shardsFanout) busiestShardCPU() time.Duration {
	var most time.Duration
	for _, d := range f.shardCPU {
		most = max(most, d)
	}
	return most
}

// fanout times a catalogue change as the catalogue step does (timeRuleChange: the bench's
// watch sees every site's status agree with the rules), with the shards running now.
func (s *shardsRun) fanout(ctx context.Context, obj client.Object, edit func(client.Object), n int) (shardsFanout, error) {
	b := s.b
	procs := s.running()
	if len(procs) != n {
		return shardsFanout{}, fmt.Errorf("%d shards running, not %d", len(procs), n)
	}
	if err := s.waitIdle(ctx); err != nil {
		return shardsFanout{}, err
	}
	snap, err := b.snapshot(ctx)
	if err != nil {
		return shardsFanout{}, err
	}
	before, after, err := snap.rules(obj, edit)
	if err != nil {
		return shardsFanout{}, err
	}
	expected := map[types.NamespacedName]eligibility.Result{}
	res := shardsFanout{shards: n, shardCPU: map[string]time.Duration{}}
	for i := range snap.sites {
		site := &snap.sites[i]
		if !sameResult(snap.evaluate(site, before), snap.evaluate(site, after)) {
			res.changed++
		}
		expected[client.ObjectKeyFromObject(site)] = snap.evaluate(site, after)
	}
	tr := newTracker(snap.sites, expected)
	b.watch.sites.setTracker(tr.observe)
	defer b.watch.sites.setTracker(nil)
	names := s.names()
	shardCPU0 := map[string]time.Duration{}
	for i, m := range procs {
		shardCPU0[names[i]] = procCPU(strconv.Itoa(m.pid()))
	}
	cpu0 := b.readCPU()
	start := time.Now()
	if err := b.updateRule(ctx, obj, edit); err != nil {
		return res, err
	}
	res.took, err = await(ctx, tr.done, start, b.p.Settle, "agreement of every site's status")
	res.cpu = b.readCPU().since(cpu0)
	for i, m := range procs {
		res.shardCPU[names[i]] = procCPU(strconv.Itoa(m.pid())) - shardCPU0[names[i]]
	}
	if err != nil {
		return res, fmt.Errorf("%w (%d sites still disagree)", err, tr.left())
	}
	return res, s.waitIdle(ctx)
}

// shardsSimulatedRatio is the fan-out ratio on a machine where the API server and etcd have
// the cores they need and each shard a core of its own: a fan-out then lasts as long as its
// busiest shard's CPU time, so 2 shards ÷ 1 is the single shard's CPU time per changed site ÷
// the busiest of the 2 shards' CPU time per changed site (each over its own rounds).
func shardsSimulatedRatio(one, two []shardsFanout) float64 {
	var cpu1, cpu2 time.Duration
	var sites1, sites2 int
	for _, f := range one {
		cpu1 += f.busiestShardCPU()
		sites1 += f.changed
	}
	for _, f := range two {
		cpu2 += f.busiestShardCPU()
		sites2 += f.changed
	}
	return ratio(cpu1.Seconds()/float64(max(sites1, 1)), cpu2.Seconds()/float64(max(sites2, 1)))
}

func reportShardsFanout(rep *report, rounds []shardsFanout) {
	var one, two []shardsFanout
	for _, f := range rounds {
		if f.shards == 1 {
			one = append(one, f)
		} else {
			two = append(two, f)
		}
	}
	rate := func(fs []shardsFanout) float64 {
		var sites int
		var took time.Duration
		for _, f := range fs {
			sites += f.changed
			took += f.took
		}
		return ratio(float64(sites), took.Seconds())
	}
	sum := func(fs []shardsFanout, f func(shardsFanout) float64) float64 {
		var t float64
		for _, x := range fs {
			t += f(x)
		}
		return t
	}
	for _, side := range []struct {
		name string
		fs   []shardsFanout
	}{{"1_shard", one}, {"2_shards", two}} {
		took := sum(side.fs, func(f shardsFanout) float64 { return f.took.Seconds() })
		sites := sum(side.fs, func(f shardsFanout) float64 { return float64(f.changed) })
		api := sum(side.fs, func(f shardsFanout) float64 { return f.cpu[roleAPIServer].Seconds() })
		etcd := sum(side.fs, func(f shardsFanout) float64 { return f.cpu[roleEtcd].Seconds() })
		mgr := sum(side.fs, func(f shardsFanout) float64 { return f.cpu[roleManager].Seconds() })
		all := sum(side.fs, func(f shardsFanout) float64 { return f.cpu.total().Seconds() })
		rep.add(scenarioShards, "fanout_sites_per_second_"+side.name, rate(side.fs), unitPerSec)
		rep.add(scenarioShards, "fanout_changed_sites_"+side.name, sites, unitCount)
		// Cores used on average over the fan-outs, against the machine's (machine_cores).
		rep.add(scenarioShards, "fanout_apiserver_cores_"+side.name, ratio(api, took), unitCount)
		rep.add(scenarioShards, "fanout_etcd_cores_"+side.name, ratio(etcd, took), unitCount)
		rep.add(scenarioShards, "fanout_managers_cores_"+side.name, ratio(mgr, took), unitCount)
		rep.add(scenarioShards, "fanout_bench_processes_cores_"+side.name, ratio(all, took), unitCount)
		rep.add(scenarioShards, "fanout_apiserver_etcd_cpu_ms_per_site_"+side.name, ratio(1000*(api+etcd), sites), unitCount)
		rep.add(scenarioShards, "fanout_managers_cpu_ms_per_site_"+side.name, ratio(1000*mgr, sites), unitCount)
	}
	rep.add(scenarioShards, "machine_cores", float64(runtime.NumCPU()), unitCount)
	rep.addTarget(scenarioShards, "fanout_2_vs_1_shard_ratio", ratio(rate(two), rate(one)), unitRatio, target{">=", shardsFanoutTarget})
	rep.addTarget(scenarioShards, "fanout_2_vs_1_shard_simulated_ratio", shardsSimulatedRatio(one, two), unitRatio,
		target{">=", shardsFanoutTarget})
	detail := make([]map[string]any, 0, len(rounds))
	for _, f := range rounds {
		detail = append(detail, map[string]any{"shards": f.shards, "changed": f.changed, "seconds": round3(f.took.Seconds()),
			"sites_per_second": round3(f.rate()), "cpu_ms_by_role": f.cpu.perUnitMS(1), "shard_cpu_seconds": f.shardCPUSeconds()})
	}
	rep.detail("shards_fanout_rounds", detail)
}
