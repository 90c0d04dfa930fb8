package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"time"

	shardingv1alpha1 "github.com/timebertt/kubernetes-controller-sharding/pkg/apis/sharding/v1alpha1"
	"github.com/timebertt/kubernetes-controller-sharding/pkg/sharding/consistenthash"
	"github.com/timebertt/kubernetes-controller-sharding/pkg/sharding/key"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/shards"
)

// The shards step (issue 38): the manager run as two shards of ControllerRing "flexsite"
// (--shard, the sharder inside shard 1 as `make run` has it) against the same control plane and
// database, measured against the singleton the other steps measure:
//
//   - balance: the share of the fleet's sites the sharder assigns each of 2 shards;
//   - fan-out: a catalogue change over every site with 2 shards ÷ with 1, in rounds
//     1 2 2 1 (shard 2 started, then stopped: the sharder moves its sites each time), with
//     the API server's and etcd's CPU during each, and the ratio a machine where the API
//     server has the headroom would see (shardsSimulatedRatio);
//   - reads: eligibility and the transactions page served by shard 2 for sites shard 1 owns
//     ÷ the same replica reading its own sites, alternating; and ÷ the singleton's reads of the
//     same fleet just before and after the shards ran (not alternating);
//   - memory: each shard's live heap (forced GC) holding the fleet of 2N sites against the
//     singleton's cold-start live heap holding N.
//
// In this first step every replica still caches every object (the REST API reads a full cache
// on each), so the memory figure measures that, not the cut the issue wants from shards.
//
// It runs on whatever fleet the earlier steps grew (it grows the fleet itself to 2N, measuring
// the singleton at N on the way, when it starts below N), and it puts the singleton back when
// it ends. It runs before the fleet step, which grows the quick run's fleet to 5,000 sites: the
// sharder's first assignment of a fleet is one patch per object, one at a time (about 50
// objects a second on the shared 2 cores), which at 5,000 sites alone would take the quick
// run's step past ten minutes.

// scenarioShards is the step's name and report key.
const scenarioShards = "shards"

// labelShards is the step's section of the table.
const labelShards = "16 shards"

func init() {
	scenarioLabels[scenarioShards] = labelShards
	// The step deletes the ControllerRing when it puts the singleton back.
	utilruntime.Must(shards.AddToScheme(scheme))
}

// Shard names of the step's two manager processes.
const (
	shardOne = "shard-1"
	shardTwo = "shard-2"
)

// Targets of the "Measured" bullets.
const (
	shardsFanoutTarget     = 1.6
	shardsReadTarget       = 0.7
	shardsHeapFactor       = 1.1
	shardsHeapAllowanceMiB = 16
	shardsBalanceLow       = 0.4
	shardsBalanceHigh      = 0.6
)

// shardsHalfFleet is N: the sites the singleton holds when the step grows the fleet itself
// (each shard then holds the fleet of 2N). Quick: 500, so that the step stays within minutes.
func shardsHalfFleet(p params) int {
	if p.Mode == modeQuick {
		return 500
	}
	return 5000
}

// shardsRun is the step's state: the shard processes (index 0 is shard 1, the bench's main
// manager while the step runs) and shard 2's configuration.
type shardsRun struct {
	b      *bench
	cfg1   managerConfig
	cfg2   managerConfig
	shard1 *managerProc
	shard2 *managerProc
	// owned is the fleet's site ids by shard, as balance counted them with 2 shards.
	owned map[string][]string
	// settled is how long the ring took to settle on each set of shards, in order.
	settled []float64
}

func runShards(ctx context.Context, b *bench, rep *report) error {
	start := time.Now()
	if b.fleet == nil {
		fleet, err := b.organisation(ctx, "bench-fleet", 10)
		if err != nil {
			return err
		}
		b.fleet = fleet
	}
	half := shardsHalfFleet(b.p)
	var singletonHalf *memory
	var sitesHalf int
	if len(b.fleet.siteIDs) < half {
		if err := b.growFleetTo(ctx, half); err != nil {
			return err
		}
		m, sites, err := b.singletonColdStart(ctx)
		if err != nil {
			return err
		}
		singletonHalf, sitesHalf = &m, sites
		if err := b.growFleetTo(ctx, 2*half); err != nil {
			return err
		}
	}
	singletonFull, sitesFull, err := b.singletonColdStart(ctx)
	if err != nil {
		return err
	}
	readsBefore, err := b.singletonReads(ctx)
	if err != nil {
		return err
	}

	s := &shardsRun{b: b}
	if err := s.configure(); err != nil {
		return err
	}
	// Whatever happens, the step ends with the singleton running again, as it began.
	defer func() {
		if rerr := s.restoreSingleton(context.WithoutCancel(ctx)); rerr != nil {
			logf("shards: putting the singleton back: %v", rerr)
		}
	}()
	if err := s.startShardOne(ctx); err != nil {
		return err
	}
	changes := catalogueChanges()[0] // the charger model's qualification: every site changes
	var rounds []shardsFanout
	round := func(n int, edit func(client.Object), name string) error {
		f, err := s.fanout(ctx, changes.obj, edit, n)
		if err != nil {
			return fmt.Errorf("fan-out with %d shards (%s): %w", n, name, err)
		}
		logf("shards: %s with %d shard(s): %d sites in %s (%.1f sites/s); API server + etcd %.2f cores, managers %v",
			name, n, f.changed, f.took.Round(time.Millisecond), f.rate(), f.apiCores(), f.shardCPUSeconds())
		rounds = append(rounds, f)
		return nil
	}
	if err := round(1, changes.edit, "change"); err != nil {
		return err
	}
	if err := s.startShardTwo(ctx); err != nil {
		return err
	}
	balance, err := s.balance(ctx)
	if err != nil {
		return err
	}
	s.owned = balance.sitesOwned
	mems, err := s.memories(ctx)
	if err != nil {
		return err
	}
	reads, err := s.foreignReads(ctx)
	if err != nil {
		return err
	}
	if err := round(2, changes.revert, "revert"); err != nil {
		return err
	}
	if err := round(2, changes.edit, "change"); err != nil {
		return err
	}
	if err := s.stopShardTwo(ctx); err != nil {
		return err
	}
	if err := round(1, changes.revert, "revert"); err != nil {
		return err
	}
	if err := s.restoreSingleton(ctx); err != nil {
		return err
	}
	readsAfter, err := b.singletonReads(ctx)
	if err != nil {
		return err
	}

	if singletonHalf == nil && b.empty != nil {
		// The fleet was past N when the step began (a whole run: the earlier steps grew it), so
		// the singleton at N is interpolated between its empty heap and its heap at the fleet.
		sitesHalf = sitesFull / 2
		singletonHalf = &memory{LiveBytes: b.empty.LiveBytes + (singletonFull.LiveBytes-b.empty.LiveBytes)/2,
			HeapBytes: b.empty.HeapBytes + (singletonFull.HeapBytes-b.empty.HeapBytes)/2}
		rep.add(scenarioShards, "singleton_heap_at_half_interpolated", 1, unitCount)
	}
	reportShardsBalance(rep, balance)
	reportShardsFanout(rep, rounds)
	reportShardsReads(rep, reads, readsBefore, readsAfter)
	reportShardsMemory(rep, singletonHalf, sitesHalf, singletonFull, sitesFull, mems)
	// How long the sharder took to assign every object of the ring's kinds: to shard 1 at
	// first (none was assigned), to both when shard 2 joined, back to shard 1 when it left.
	for i, name := range []string{"ring_settle_seconds_first_assignment", "ring_settle_seconds_shard_2_joined",
		"ring_settle_seconds_shard_2_left"} {
		if i < len(s.settled) {
			rep.add(scenarioShards, name, s.settled[i], unitSeconds)
		}
	}
	rep.add(scenarioShards, "step_seconds", time.Since(start).Seconds(), unitSeconds)
	return nil
}

// singletonColdStart restarts the singleton, waits until it is idle and measures its live
// heap: the cold-start heap the memory target is of. It answers the cluster's sites.
func (b *bench) singletonColdStart(ctx context.Context) (memory, int, error) {
	b.mgr.stop()
	if err := b.startManager(ctx); err != nil {
		return memory{}, 0, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return memory{}, 0, err
	}
	sites, err := b.siteCount(ctx)
	if err != nil {
		return memory{}, 0, err
	}
	m, err := b.mgr.memory(ctx)
	if err != nil {
		return memory{}, 0, err
	}
	logf("shards: the singleton's cold start at %d sites: live heap %.1f MiB, heap in use %.1f MiB",
		sites, m.LiveBytes/mib, m.HeapBytes/mib)
	return m, sites, nil
}

// singletonReads is the singleton's read rate of each read over the whole fleet (warmed).
func (b *bench) singletonReads(ctx context.Context) (map[string]float64, error) {
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return nil, err
	}
	endpoints := readEndpoints(b.mgr.apiURL, b.fleet.siteIDs)
	if err := b.warmReads(ctx, endpoints, len(b.fleet.siteIDs), token); err != nil {
		return nil, err
	}
	results, err := b.measureMirrored(ctx, endpoints, token)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, e := range endpoints {
		out[e.name] = results[e.name].t.rate()
	}
	logf("shards: the singleton reads %v per second", out)
	return out, nil
}

// configure makes the two shards' configurations from the singleton's: shard 1 takes over
// its ports and webhook server and runs the sharder (its webhook on that server, whose CA the
// bench writes out); shard 2 has ports of its own, and its own webhook port (it serves
// Flexsite's admission webhooks too, which nobody calls there).
func (s *shardsRun) configure() error {
	b := s.b
	caFile := filepath.Join(b.tmp, "webhook-ca.pem")
	if err := os.WriteFile(caFile, b.cp.Webhook.CAData, 0o600); err != nil {
		return err
	}
	wh := b.cp.Webhook
	s.cfg1 = b.mgrCfg
	s.cfg1.args = append(append([]string(nil), b.mgrCfg.args...), "--shard", "--leader-elect", "--shard-name="+shardOne,
		"--sharder", fmt.Sprintf("--sharder-webhook-url=https://%s:%d/", wh.Host, wh.Port), "--sharder-webhook-ca-file="+caFile)
	ports, err := freePorts(4)
	if err != nil {
		return err
	}
	s.cfg2 = managerConfig{
		binary:      b.mgrCfg.binary,
		logPath:     filepath.Join(filepath.Dir(b.mgrCfg.logPath), "manager-"+shardTwo+".log"),
		apiAddr:     fmt.Sprintf("127.0.0.1:%d", ports[0]),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		pprofAddr:   fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}
	for _, a := range b.mgrCfg.args {
		switch {
		case hasFlag(a, "--api-addr"), hasFlag(a, "--metrics-bind-address"), hasFlag(a, "--pprof-bind-address"),
			hasFlag(a, "--webhook-port"):
			continue
		}
		s.cfg2.args = append(s.cfg2.args, a)
	}
	s.cfg2.args = append(s.cfg2.args, "--api-addr="+s.cfg2.apiAddr, "--metrics-bind-address="+s.cfg2.metricsAddr,
		"--pprof-bind-address="+s.cfg2.pprofAddr, "--webhook-port="+strconv.Itoa(ports[3]),
		"--shard", "--leader-elect", "--shard-name="+shardTwo)
	return os.WriteFile(s.cfg2.logPath, nil, 0o644)
}

func hasFlag(arg, name string) bool {
	return arg == name || len(arg) > len(name) && arg[:len(name)+1] == name+"="
}

// startShardOne replaces the singleton by shard 1 (the sharder in it) and waits until the
// sharder has assigned every site to it.
func (s *shardsRun) startShardOne(ctx context.Context) error {
	b := s.b
	b.mgr.stop()
	mgr, err := startManager(s.cfg1)
	if err != nil {
		return err
	}
	b.mgr, s.shard1 = mgr, mgr
	if _, err := mgr.waitReady(ctx, b.p.Settle); err != nil {
		return err
	}
	logf("shards: %s up (pid %d, the sharder in it)", shardOne, mgr.pid())
	return s.waitRing(ctx, shardOne)
}

// startShardTwo starts shard 2 and waits until the sharder has moved its share to it.
func (s *shardsRun) startShardTwo(ctx context.Context) error {
	mgr, err := startManager(s.cfg2)
	if err != nil {
		return err
	}
	s.shard2 = mgr
	if _, err := mgr.waitReady(ctx, s.b.p.Settle); err != nil {
		return err
	}
	logf("shards: %s up (pid %d)", shardTwo, mgr.pid())
	return s.waitRing(ctx, shardOne, shardTwo)
}

// stopShardTwo stops shard 2 (SIGTERM: it releases its lease) and waits until the sharder
// has given its sites back to shard 1.
func (s *shardsRun) stopShardTwo(ctx context.Context) error {
	s.shard2.stop()
	s.shard2 = nil
	return s.waitRing(ctx, shardOne)
}

// restoreSingleton stops the shards, removes the ring and the sharder's webhook (nothing here
// collects garbage: the embedded control plane runs no controller manager), and starts the
// singleton again with the configuration the other steps measured. Safe to call twice.
func (s *shardsRun) restoreSingleton(ctx context.Context) error {
	if s.shard1 == nil {
		return nil
	}
	if s.shard2 != nil {
		s.shard2.stop()
		s.shard2 = nil
	}
	s.shard1.stop()
	s.shard1 = nil
	b := s.b
	for _, obj := range []client.Object{
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "controllerring-" + shards.RingName}},
		&shardingv1alpha1.ControllerRing{ObjectMeta: metav1.ObjectMeta{Name: shards.RingName}},
	} {
		if err := b.c.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	if err := b.startManager(ctx); err != nil {
		return err
	}
	_, err := b.mgr.waitIdle(ctx, b.p.Settle)
	return err
}

// shards are the running shard processes.
func (s *shardsRun) running() []*managerProc {
	var out []*managerProc
	for _, m := range []*managerProc{s.shard1, s.shard2} {
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// waitIdle waits until every running shard is idle, then the first again (the second's
// last writes may have given it work).
func (s *shardsRun) waitIdle(ctx context.Context) error {
	procs := s.running()
	for _, m := range append(procs, procs[0]) {
		if _, err := m.waitIdle(ctx, s.b.p.Settle); err != nil {
			return err
		}
	}
	return nil
}

// waitRing waits until the ring has settled on these shards: every object of the ring's kinds
// assigned where the sharder's hash ring over them puts it, and none being drained. Then the
// shards are waited idle.
func (s *shardsRun) waitRing(ctx context.Context, live ...string) error {
	start := time.Now()
	// The sharder's own hash ring over these shards: where it will have put every object once
	// it is done (an object still on a live shard may yet be moved).
	hashRing := consistenthash.New(nil, 0, live...)
	var last string
	err := pollEvery(ctx, ringPollInterval, s.b.p.Settle, func() error {
		for _, list := range shards.RingLists() {
			var pending int
			var kind string
			err := listPages(ctx, s.b.c, list, func(l client.ObjectList) {
				kind = fmt.Sprintf("%T", l)
				_ = meta.EachListItem(l, func(item k8sruntime.Object) error {
					obj := item.(client.Object)
					labels := obj.GetLabels()
					_, draining := labels[shards.DrainLabel]
					if draining || labels[shards.ShardLabel] != desiredShard(hashRing, obj) {
						pending++
					}
					return nil
				})
			})
			if err != nil {
				return err
			}
			if pending > 0 {
				last = fmt.Sprintf("%d %s objects not yet on %v", pending, kind, live)
				return fmt.Errorf("%s", last)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("the ring did not settle on %v: %w", live, err)
	}
	// Idle includes the sharder's own controller: its resync patches object after object, one
	// at a time, and is done only when its worker is.
	if err := s.waitIdle(ctx); err != nil {
		return err
	}
	logf("shards: the ring settled on %v in %s", live, time.Since(start).Round(100*time.Millisecond))
	s.settled = append(s.settled, time.Since(start).Seconds())
	return nil
}

// ringPollInterval spaces the lists that tell whether the ring has settled: at 10,000 sites
// each is 50,000 objects, which must not slow the sharder it waits for.
const ringPollInterval = 2 * time.Second

// pollEvery calls f every interval until it succeeds or limit has passed, returning its last
// error.
func pollEvery(ctx context.Context, interval, limit time.Duration, f func() error) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
}

// desiredShard is the shard the sharder assigns obj to on hashRing: by its own key for a Site,
// by its controller's (its Site's) for the kinds a Site controls ("" if it cannot tell).
func desiredShard(hashRing *consistenthash.Ring, obj client.Object) string {
	var hashKey string
	var err error
	if site, ok := obj.(*flexv1.Site); ok {
		withKind := &metav1.PartialObjectMetadata{ObjectMeta: site.ObjectMeta}
		withKind.SetGroupVersionKind(flexv1.GroupVersion.WithKind("Site"))
		hashKey, err = key.ForObject(withKind)
	} else {
		hashKey, err = key.ForController(obj)
	}
	if err != nil || hashKey == "" {
		return ""
	}
	return hashRing.Hash(hashKey)
}

// shardsBalance is how many of the fleet's sites each shard owns.
type shardsBalance struct {
	fleet      int
	byShard    map[string]int
	sitesOwned map[string][]string // site ids of the fleet, by shard
}

// balance counts the shard labels over the fleet's sites, from the API server.
func (s *shardsRun) balance(ctx context.Context) (shardsBalance, error) {
	idByName := map[string]string{}
	for i, name := range s.b.fleet.siteNames {
		idByName[name] = s.b.fleet.siteIDs[i]
	}
	out := shardsBalance{byShard: map[string]int{}, sitesOwned: map[string][]string{}}
	err := listPages(ctx, s.b.c, &flexv1.SiteList{}, func(l client.ObjectList) {
		for _, site := range l.(*flexv1.SiteList).Items {
			id, ok := idByName[site.Name]
			if site.Namespace != s.b.fleet.ns || !ok {
				continue
			}
			shard := shards.ShardOf(&site)
			out.fleet++
			out.byShard[shard]++
			out.sitesOwned[shard] = append(out.sitesOwned[shard], id)
		}
	})
	logf("shards: the fleet's %d sites by shard: %v", out.fleet, out.byShard)
	return out, err
}

// memories are each shard's memory, idle, after a forced collection.
func (s *shardsRun) memories(ctx context.Context) (map[string]memory, error) {
	out := map[string]memory{}
	for name, m := range map[string]*managerProc{shardOne: s.shard1, shardTwo: s.shard2} {
		mem, err := m.memory(ctx)
		if err != nil {
			return nil, err
		}
		out[name] = mem
		logf("shards: %s live heap %.1f MiB, heap in use %.1f MiB", name, mem.LiveBytes/mib, mem.HeapBytes/mib)
	}
	return out, nil
}

// Names of the reads of shard 2: of the sites shard 1 owns, and of its own.
const (
	foreignSuffix = "_foreign"
	ownSuffix     = "_own"
)

// foreignReads loads shard 2 with each read over shard 1's sites and over its own, in
// mirrored passes, and answers each target's rate.
func (s *shardsRun) foreignReads(ctx context.Context) (map[string]float64, error) {
	b := s.b
	foreign, own := s.sitesOf(shardOne), s.sitesOf(shardTwo)
	if len(foreign) == 0 || len(own) == 0 {
		return nil, fmt.Errorf("a shard owns no site of the fleet (%s %d, %s %d)", shardOne, len(foreign), shardTwo, len(own))
	}
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return nil, err
	}
	var targets []readTarget
	for _, e := range readEndpoints(s.shard2.apiURL, foreign) {
		e.name += foreignSuffix
		targets = append(targets, e)
	}
	for _, e := range readEndpoints(s.shard2.apiURL, own) {
		e.name += ownSuffix
		targets = append(targets, e)
	}
	if err := b.warmReads(ctx, targets[:2], len(foreign), token); err != nil {
		return nil, err
	}
	if err := b.warmReads(ctx, targets[2:], len(own), token); err != nil {
		return nil, err
	}
	results, err := b.measureMirrored(ctx, targets, token)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, t := range targets {
		out[t.name] = results[t.name].t.rate()
	}
	logf("shards: %s reads per second %v", shardTwo, out)
	return out, nil
}

// sitesOf is the fleet's site ids the shard owns (as balance last counted them).
func (s *shardsRun) sitesOf(shard string) []string { return s.owned[shard] }

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
	names := []string{shardOne, shardTwo}
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

func reportShardsBalance(rep *report, bal shardsBalance) {
	rep.add(scenarioShards, "fleet_sites", float64(bal.fleet), unitCount)
	for _, name := range []string{shardOne, shardTwo} {
		share := ratio(float64(bal.byShard[name]), float64(bal.fleet))
		rep.add(scenarioShards, name+"_sites", float64(bal.byShard[name]), unitCount)
		// The 40–60 %: a share inside it is met; one target row per bound.
		rep.addTarget(scenarioShards, name+"_share_ratio", share, unitRatio, target{">=", shardsBalanceLow})
		rep.addTarget(scenarioShards, name+"_share_max_ratio", share, unitRatio, target{"<=", shardsBalanceHigh})
	}
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

func reportShardsReads(rep *report, reads, before, after map[string]float64) {
	for _, name := range []string{eligibilityTarget, transactionsTarget} {
		foreign, own := reads[name+foreignSuffix], reads[name+ownSuffix]
		singleton := (before[name] + after[name]) / 2
		rep.add(scenarioShards, name+"_rps_foreign", foreign, unitPerSec)
		rep.add(scenarioShards, name+"_rps_own", own, unitPerSec)
		rep.add(scenarioShards, name+"_rps_singleton_before", before[name], unitPerSec)
		rep.add(scenarioShards, name+"_rps_singleton_after", after[name], unitPerSec)
		// Alternating: the same replica, the same clients, the two sets of sites.
		rep.addTarget(scenarioShards, name+"_foreign_vs_own_ratio", ratio(foreign, own), unitRatio, target{">=", shardsReadTarget})
		// Not alternating: the singleton read just before and just after the shards ran.
		rep.addTarget(scenarioShards, name+"_foreign_vs_singleton_ratio", ratio(foreign, singleton), unitRatio,
			target{">=", shardsReadTarget})
	}
}

func reportShardsMemory(rep *report, half *memory, sitesHalf int, full memory, sitesFull int, mems map[string]memory) {
	rep.add(scenarioShards, "singleton_sites_full", float64(sitesFull), unitCount)
	rep.add(scenarioShards, "singleton_live_heap_mib_full", full.LiveBytes/mib, unitMiB)
	for _, name := range []string{shardOne, shardTwo} {
		m := mems[name]
		rep.add(scenarioShards, name+"_live_heap_mib", m.LiveBytes/mib, unitMiB)
		rep.add(scenarioShards, name+"_heap_inuse_mib", m.HeapBytes/mib, unitMiB)
		// Every replica still caches every object: a shard against the singleton at the same fleet.
		rep.add(scenarioShards, name+"_vs_singleton_same_fleet_heap_ratio", ratio(m.LiveBytes, full.LiveBytes), unitRatio)
		if half == nil {
			continue
		}
		// The issue's: each shard holding 2N ≤ 1.1 × the singleton holding N + 16 MiB.
		budget := shardsHeapFactor*half.LiveBytes + shardsHeapAllowanceMiB*mib
		rep.addTarget(scenarioShards, name+"_heap_vs_singleton_half_budget_ratio", ratio(m.LiveBytes, budget), unitRatio,
			target{"<=", 1})
	}
	if half != nil {
		rep.add(scenarioShards, "singleton_sites_half", float64(sitesHalf), unitCount)
		rep.add(scenarioShards, "singleton_live_heap_mib_half", half.LiveBytes/mib, unitMiB)
	}
}
