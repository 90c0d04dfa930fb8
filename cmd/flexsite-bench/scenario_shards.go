package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	"github.com/flexsite/flexsite/internal/shards"
)

// The shards step runs Flexsite in its two tiers as the chart deploys them with sharding on
// (docs/scale.md, "Two tiers"): an API tier replica (--tier=api --leader-elect, on the
// singleton's addresses and admission webhook, caching every household), controller tier shards
// of ControllerRing "flexsite" (--tier=controllers, each caching only the households labelled
// for it) and timebertt's sharder (in the bench, as the chart's sharder Deployment, at the
// chart's client rate), against the same control plane and database as the other steps. It
// measures:
//
//   - memory of the controller tier: each of 2 shards holding 2N sites against a controller
//     tier singleton (one shard alone in the ring) holding N, plus 16 MiB;
//   - memory of the API tier: an API replica's live heap per 1,000 sites, from its cold
//     starts at N and at 2N sites;
//   - fan-out: a catalogue change over every site with 2 shards ÷ with 1 (rounds 1, 2, 2, 1, 1),
//     measured, and simulated from the shards' CPU per changed site;
//   - reads: eligibility and a transactions page on the API replica ÷ on the singleton
//     (--tier=all), alternating, both up at once;
//   - cross-replica staleness: a write through one API replica until another's REST read shows
//     it;
//   - a departed shard: shard 2 killed (its lease left to expire, as a lost node), the time
//     until the first of its households is reconciled by shard 1, and households per second.
//
// Its households are an organisation of their own (shardsNamespace), grown to N with the
// singleton (N is then the sites the cluster holds when the controller tier singleton is
// measured: the mode's N, as the step runs first in a whole run, runScenarios), and to 2N
// through the API replica. When it ends it deletes them (when later steps follow: through its
// shard, before the tiers stop) and puts the singleton back, so that the steps after it find
// the cluster as it was. The sharder's assignment of a fleet is one patch per object at its
// client's rate: the step's bounds hold for its own 2N, not for what other steps grow.

// scenarioShards is the step's name and report key.
const scenarioShards = "shards"

// labelShards is the step's section of the table.
const labelShards = "16 shards"

func init() {
	scenarioLabels[scenarioShards] = labelShards
	// The bench runs the sharder, and deletes the ControllerRing when it puts the singleton back.
	utilruntime.Must(shards.AddToScheme(scheme))
}

// Shard names of the step's two controller tier processes.
const (
	shardOne = "shard-1"
	shardTwo = "shard-2"
)

// Targets of the figures.
const (
	shardsFanoutTarget = 1.6
	// shardsReadTarget: reads on an API replica ÷ on the singleton.
	shardsReadTarget = 0.9
	// A shard holding 2N ÷ (the controller tier singleton holding N + 16 MiB).
	shardsHeapFactor       = 1.1
	shardsHeapAllowanceMiB = 16
	// An API replica's live heap per 1,000 sites (MiB).
	shardsAPIHeapPer1kMiB = 12
	// A departed shard's first household reconciled elsewhere, in lease durations.
	shardsDepartureLeases = 3
	shardsBalanceLow      = 0.4
	shardsBalanceHigh     = 0.6
)

// shardsNamespace is the organisation of the step's households, and shardsMPANPrefix their
// MPANs' first two digits (no other step's).
const (
	shardsNamespace  = "bench-shards"
	shardsMPANPrefix = 23
)

// shardsHalfFleet is N: the sites the controller tier singleton holds at least (each shard
// then holds its share of 2N). Quick: 500, so that the step stays within minutes.
func shardsHalfFleet(p params) int {
	if p.Mode == modeQuick {
		return 500
	}
	return 5000
}

// shardsRun is the step's state: the sharder, the API replica (the bench's main manager while
// the step runs) and the running shards.
type shardsRun struct {
	b       *bench
	sharder *sharderProc
	apiCfg  managerConfig
	api     *managerProc
	shards  map[string]*managerProc
	// owned is the fleet's site ids by shard, and every site's key by shard, as balance
	// counted them with 2 shards.
	owned     map[string][]string
	ownedKeys map[string][]types.NamespacedName
	// settled is how long the ring took to settle on each set of shards, in order.
	settled []float64
	// switched: the singleton was stopped for the tiers (restoreSingleton starts it again).
	switched bool
}

func runShards(ctx context.Context, b *bench, rep *report) error {
	start := time.Now()
	rep.add(scenarioShards, "load_1m_start", loadAvg1(), unitCount)
	// The step's households, in the fleet's place while it runs (its reads and writes go to
	// b.fleet); the fleet of the other steps is theirs again when it ends.
	fleet, err := b.organisation(ctx, shardsNamespace, shardsMPANPrefix)
	if err != nil {
		return err
	}
	was := b.fleet
	b.fleet = fleet
	defer func() { b.fleet = was }()
	if err := b.growFleetTo(ctx, shardsHalfFleet(b.p)); err != nil {
		return err
	}

	s := &shardsRun{b: b, shards: map[string]*managerProc{}}
	// Whatever happens, the step ends with the singleton running again, as it began.
	defer func() {
		if rerr := s.restoreSingleton(context.WithoutCancel(ctx)); rerr != nil {
			logf("shards: putting the singleton back: %v", rerr)
		}
	}()
	// The tiers at N: the API replica, the sharder, shard 1 alone.
	if err := s.startTiers(ctx); err != nil {
		return err
	}
	sitesHalf, err := b.siteCount(ctx)
	if err != nil {
		return err
	}
	// The controller tier singleton is a --tier=controllers shard alone in the ring, not a
	// --tier=all manager: the same work as each of the two shards (the per-site reconcilers, the
	// ring kinds' cache narrowed by the shard label, the cluster-wide kinds whole), so that the
	// ratio says what a second shard takes off. A --tier=all singleton would also hold the API
	// tier's state (the doors, delivery, the APIClient cache and index), which flatters it.
	singletonHalf, err := s.shard(shardOne).memory(ctx)
	if err != nil {
		return err
	}
	apiHalf, err := s.api.memory(ctx)
	if err != nil {
		return err
	}
	logf("shards: at %d sites, %s alone live heap %.1f MiB, the API replica %.1f MiB",
		sitesHalf, shardOne, singletonHalf.LiveBytes/mib, apiHalf.LiveBytes/mib)

	// 2N: the fleet grown through the API replica by as many sites as the cluster held.
	if err := b.growFleetTo(ctx, len(b.fleet.siteIDs)+sitesHalf); err != nil {
		return err
	}
	if err := s.waitIdle(ctx); err != nil {
		return err
	}
	sitesFull, err := b.siteCount(ctx)
	if err != nil {
		return err
	}
	// The API replica's heap at 2N from a cold start, as at N.
	if err := s.restartAPI(ctx); err != nil {
		return err
	}
	apiFull, err := s.api.memory(ctx)
	if err != nil {
		return err
	}
	logf("shards: at %d sites the API replica's live heap %.1f MiB", sitesFull, apiFull.LiveBytes/mib)

	changes := catalogueChanges()[0] // the charger model's qualification: every site changes
	var rounds []shardsFanout
	round := func(n int, edit func(client.Object), name string) error {
		f, err := s.fanout(ctx, changes.obj, edit, n)
		if err != nil {
			return fmt.Errorf("fan-out with %d shards (%s): %w", n, name, err)
		}
		logf("shards: %s with %d shard(s): %d sites in %s (%.1f sites/s); API server + etcd %.2f cores, shards %v",
			name, n, f.changed, f.took.Round(time.Millisecond), f.rate(), f.apiCores(), f.shardCPUSeconds())
		rounds = append(rounds, f)
		return nil
	}
	if err := round(1, changes.edit, "change"); err != nil {
		return err
	}
	if err := s.startShard(ctx, shardTwo); err != nil {
		return err
	}
	balance, err := s.balance(ctx)
	if err != nil {
		return err
	}
	s.owned, s.ownedKeys = balance.sitesOwned, balance.keysOwned
	mems, err := s.memories(ctx)
	if err != nil {
		return err
	}
	if err := round(2, changes.revert, "revert"); err != nil {
		return err
	}
	if err := round(2, changes.edit, "change"); err != nil {
		return err
	}
	reads, err := s.reads(ctx)
	if err != nil {
		return err
	}
	stale, err := s.staleness(ctx)
	if err != nil {
		return err
	}
	dep, err := s.departure(ctx, changes.obj, changes.revert)
	if err != nil {
		return err
	}
	if err := round(1, changes.edit, "change"); err != nil {
		return err
	}
	if err := round(1, changes.revert, "revert"); err != nil {
		return err
	}
	if b.later {
		if err := s.deleteHouseholds(ctx); err != nil {
			return err
		}
	}
	if err := s.restoreSingleton(ctx); err != nil {
		return err
	}

	reportShardsBalance(rep, balance)
	reportShardsMemory(rep, singletonHalf, sitesHalf, mems, sitesFull)
	reportShardsAPIMemory(rep, apiHalf, sitesHalf, apiFull, sitesFull)
	reportShardsFanout(rep, rounds)
	reportShardsReads(rep, reads)
	reportShardsStaleness(rep, stale)
	reportShardsDeparture(rep, dep)
	// How long the sharder took to assign every object of the ring's kinds: to shard 1 at
	// first (none was assigned), to both when shard 2 joined, to shard 1 when shard 2 died.
	for i, name := range []string{"ring_settle_seconds_first_assignment", "ring_settle_seconds_shard_2_joined",
		"ring_settle_seconds_shard_2_departed"} {
		if i < len(s.settled) {
			rep.add(scenarioShards, name, s.settled[i], unitSeconds)
		}
	}
	rep.add(scenarioShards, "load_1m_end", loadAvg1(), unitCount)
	rep.add(scenarioShards, "step_seconds", time.Since(start).Seconds(), unitSeconds)
	return nil
}

// loadAvg1 is the machine's one-minute load average (other work on the shared cores weighs on
// every figure of the step).
func loadAvg1() float64 {
	var v float64
	_, _ = fmt.Sscanf(readLoadAvg(), "%f", &v)
	return v
}

// tierConfig is a manager configuration of its own: fresh ports (REST API, metrics, pprof,
// webhook, and with probe its own /readyz), the singleton's other flags but the default rules'
// installation (the API replica's), and args.
func (s *shardsRun) tierConfig(name string, probe bool, args ...string) (managerConfig, error) {
	b := s.b
	ports, err := freePorts(5)
	if err != nil {
		return managerConfig{}, err
	}
	cfg := managerConfig{
		binary:      b.mgrCfg.binary,
		logPath:     filepath.Join(filepath.Dir(b.mgrCfg.logPath), "manager-"+name+".log"),
		apiAddr:     fmt.Sprintf("127.0.0.1:%d", ports[0]),
		metricsAddr: fmt.Sprintf("127.0.0.1:%d", ports[1]),
		pprofAddr:   fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}
	for _, a := range b.mgrCfg.args {
		switch {
		case hasFlag(a, "--api-addr"), hasFlag(a, "--metrics-bind-address"), hasFlag(a, "--pprof-bind-address"),
			hasFlag(a, "--webhook-port"), hasFlag(a, "--install-default-rules"):
			continue
		}
		cfg.args = append(cfg.args, a)
	}
	cfg.args = append(cfg.args, "--api-addr="+cfg.apiAddr, "--metrics-bind-address="+cfg.metricsAddr,
		"--pprof-bind-address="+cfg.pprofAddr, "--webhook-port="+strconv.Itoa(ports[3]))
	if probe {
		cfg.probeAddr = fmt.Sprintf("127.0.0.1:%d", ports[4])
		cfg.args = append(cfg.args, "--health-probe-bind-address="+cfg.probeAddr)
	}
	cfg.args = append(cfg.args, args...)
	return cfg, os.WriteFile(cfg.logPath, nil, 0o644)
}

func hasFlag(arg, name string) bool {
	return arg == name || len(arg) > len(name) && arg[:len(name)+1] == name+"="
}

// startTiers replaces the singleton by the API replica (its addresses and webhook server,
// --tier=api --leader-elect), starts the sharder and shard 1, and waits until the sharder has
// assigned every site to shard 1.
func (s *shardsRun) startTiers(ctx context.Context) error {
	b := s.b
	b.mgr.stop()
	s.switched = true
	s.apiCfg = b.mgrCfg
	s.apiCfg.args = append(append([]string(nil), b.mgrCfg.args...), "--tier=api", "--leader-elect")
	if err := s.startAPI(ctx); err != nil {
		return err
	}
	sh, err := b.startSharder(ctx)
	if err != nil {
		return err
	}
	s.sharder = sh
	return s.startShard(ctx, shardOne)
}

// startAPI starts the API replica as the bench's main manager and waits for its /readyz.
func (s *shardsRun) startAPI(ctx context.Context) error {
	mgr, err := startManager(s.apiCfg)
	if err != nil {
		return err
	}
	s.api, s.b.mgr = mgr, mgr
	if _, err := mgr.waitReady(ctx, s.b.p.Settle); err != nil {
		return err
	}
	logf("shards: the API replica up (pid %d, --tier=api)", mgr.pid())
	return nil
}

// restartAPI restarts the API replica (SIGTERM: it releases the leader lease) and waits until
// it is ready and idle: its cold-start heap.
func (s *shardsRun) restartAPI(ctx context.Context) error {
	s.api.stop()
	if err := s.startAPI(ctx); err != nil {
		return err
	}
	_, err := s.api.waitIdle(ctx, s.b.p.Settle)
	return err
}

// shard is a running shard.
func (s *shardsRun) shard(name string) *managerProc { return s.shards[name] }

// startShard starts a controller tier shard (--tier=controllers --leader-elect, its /readyz on
// its probe address) and waits until the ring has settled on the shards running then.
func (s *shardsRun) startShard(ctx context.Context, name string) error {
	cfg, err := s.tierConfig(name, true, "--tier=controllers", "--leader-elect", "--shard-name="+name)
	if err != nil {
		return err
	}
	mgr, err := startManager(cfg)
	if err != nil {
		return err
	}
	s.shards[name] = mgr
	if _, err := mgr.waitReady(ctx, s.b.p.Settle); err != nil {
		return err
	}
	logf("shards: %s up (pid %d, --tier=controllers)", name, mgr.pid())
	return s.waitRing(ctx, s.names()...)
}

// names are the running shards' names, in order.
func (s *shardsRun) names() []string {
	var out []string
	for _, name := range []string{shardOne, shardTwo} {
		if s.shards[name] != nil {
			out = append(out, name)
		}
	}
	return out
}

// restoreSingleton stops the tiers and the sharder, removes the ring and the sharder's webhook
// (nothing here collects garbage: the embedded control plane runs no controller manager), and
// starts the singleton again with the configuration the other steps measured. Safe to call
// twice.
func (s *shardsRun) restoreSingleton(ctx context.Context) error {
	if !s.switched {
		return nil
	}
	s.switched = false
	for name, m := range s.shards {
		m.stop()
		delete(s.shards, name)
	}
	if s.api != nil {
		s.api.stop()
		s.api = nil
	}
	s.sharder.stop()
	s.sharder = nil
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

// deleteHouseholds deletes the step's households and waits until none of their objects is
// left: each site's shard finalizes it (its children, its bank details, its last event), as
// it would in a cluster, while the tiers still run. The steps after this one then start from
// the cluster as it was before it.
func (s *shardsRun) deleteHouseholds(ctx context.Context) error {
	b := s.b
	start := time.Now()
	sites, err := b.siteCountIn(ctx, shardsNamespace)
	if err != nil {
		return err
	}
	if err := b.c.DeleteAllOf(ctx, &flexv1.Site{}, client.InNamespace(shardsNamespace)); err != nil {
		return fmt.Errorf("deleting the step's sites: %w", err)
	}
	// Each site's finalizer deletes its children, waits for them to go and writes its last
	// event: on the loaded 2-core box about 5 households a second with one shard, so the bound
	// grows with them (a full run deletes 10,000).
	bound := max(b.p.Settle, time.Duration(sites)*deletedHouseholdBound)
	err = pollEvery(ctx, ringPollInterval, bound, func() error {
		for _, list := range shards.RingLists() {
			if err := b.c.List(ctx, list, client.InNamespace(shardsNamespace), client.Limit(1)); err != nil {
				return err
			}
			if meta.LenList(list) > 0 {
				return fmt.Errorf("%T objects left", list)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("deleting the step's households: %w", err)
	}
	if err := s.waitIdle(ctx); err != nil {
		return err
	}
	logf("shards: the step's households deleted in %s", time.Since(start).Round(100*time.Millisecond))
	return nil
}

// deletedHouseholdBound is what deleting one of the step's households may take, at most (a
// bound for failure only: a quarter of a second, where the loaded box deletes five a second).
const deletedHouseholdBound = 250 * time.Millisecond

// running are the running shard processes, in order.
func (s *shardsRun) running() []*managerProc {
	names := s.names()
	out := make([]*managerProc, 0, len(names))
	for _, name := range names {
		out = append(out, s.shards[name])
	}
	return out
}

// waitIdle waits until the API replica and every running shard is idle, then the first shard
// again (the others' last writes may have given it work).
func (s *shardsRun) waitIdle(ctx context.Context) error {
	procs := append([]*managerProc{s.api}, s.running()...)
	if len(procs) > 1 {
		procs = append(procs, procs[1])
	}
	for _, m := range procs {
		if _, err := m.waitIdle(ctx, s.b.p.Settle); err != nil {
			return err
		}
	}
	return nil
}

// objectsPerSite is how many objects of the ring's kinds a household holds, about: its Site,
// two Assets, an Enrolment and a RewardLedger.
const objectsPerSite = 5

// waitRing waits until the ring has settled on these shards: every object of the ring's kinds
// assigned where the sharder's hash ring over them puts it, and none being drained. Then the
// tiers are waited idle.
func (s *shardsRun) waitRing(ctx context.Context, live ...string) error {
	start := time.Now()
	// The sharder's own hash ring over these shards: where it will have put every object once
	// it is done (an object still on a live shard may yet be moved).
	hashRing := consistenthash.New(nil, 0, live...)
	var last string
	// The sharder moves objects at its client's rate: a ring over a large cluster (a whole
	// quick run reaches this step with thousands of households) takes longer than the usual
	// bound to settle. Each household is about objectsPerSite ring objects, each moved by a
	// drain and a label write.
	bound := s.b.p.Settle
	if sites, err := s.b.siteCount(ctx); err == nil {
		bound = max(bound, time.Duration(2*sites*objectsPerSite*2/sharderQPS)*time.Second)
	}
	err := pollEvery(ctx, ringPollInterval, bound, func() error {
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
	// keysOwned is every site of the cluster, by shard.
	keysOwned map[string][]types.NamespacedName
}

// balance counts the shard labels over the sites, from the API server.
func (s *shardsRun) balance(ctx context.Context) (shardsBalance, error) {
	idByName := map[string]string{}
	for i, name := range s.b.fleet.siteNames {
		idByName[name] = s.b.fleet.siteIDs[i]
	}
	out := shardsBalance{byShard: map[string]int{}, sitesOwned: map[string][]string{}, keysOwned: map[string][]types.NamespacedName{}}
	err := listPages(ctx, s.b.c, &flexv1.SiteList{}, func(l client.ObjectList) {
		for i := range l.(*flexv1.SiteList).Items {
			site := &l.(*flexv1.SiteList).Items[i]
			shard := shards.ShardOf(site)
			out.keysOwned[shard] = append(out.keysOwned[shard], client.ObjectKeyFromObject(site))
			id, ok := idByName[site.Name]
			if site.Namespace != s.b.fleet.ns || !ok {
				continue
			}
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
	for _, name := range s.names() {
		mem, err := s.shards[name].memory(ctx)
		if err != nil {
			return nil, err
		}
		out[name] = mem
		logf("shards: %s live heap %.1f MiB, heap in use %.1f MiB", name, mem.LiveBytes/mib, mem.HeapBytes/mib)
	}
	return out, nil
}

// Suffixes of the read targets: on the API replica, and on the singleton.
const (
	apiSuffix       = "_api"
	singletonSuffix = "_singleton"
)

// reads loads the API replica and a singleton (--tier=all) with each read over the fleet, in
// alternating mirrored passes, and answers each target's rate. The singleton runs beside the
// tiers for these reads alone, without leader election (out of a cluster, a manager without
// shards has no namespace to elect in): everything is idle then, so its reconcilers find
// nothing to change; its reads are the singleton's (the same cache of every household, the
// same doors).
func (s *shardsRun) reads(ctx context.Context) (map[string]float64, error) {
	b := s.b
	cfg, err := s.tierConfig("singleton-reads", false, "--tier=all")
	if err != nil {
		return nil, err
	}
	single, err := startManager(cfg)
	if err != nil {
		return nil, err
	}
	defer single.stop()
	if _, err := single.waitReady(ctx, b.p.Settle); err != nil {
		return nil, err
	}
	if _, err := single.waitIdle(ctx, b.p.Settle); err != nil {
		return nil, err
	}
	token, err := b.fleet.api.bearer(ctx)
	if err != nil {
		return nil, err
	}
	ids := b.fleet.siteIDs
	// One read at a time, the two managers alternating in short mirrored passes (A B, B A,
	// ...), as the other ratios of a target to its baseline are measured. All four in one
	// rotation (A B C D, D C B A) gave the API replica's transactions page two of the slots
	// that move the load from one process to the other, and the singleton's none, and the
	// eligibility read the other way round: the two ratios then differed by ~0.1 (0.81–0.96
	// against 0.92–1.09) for no difference between the managers: a read on the API replica
	// makes no GET and no SQL the singleton's does not, and costs it no more CPU (logged).
	out := map[string]float64{}
	// Each side's CPU time per read, beside its rate: on the shared box the rate follows the
	// CPU the machine gives a process in its slots, the CPU a read costs much less so.
	cpuPerRead := map[string]float64{}
	onSingleton := readEndpoints(single.apiURL, ids)
	for i, e := range readEndpoints(s.api.apiURL, ids) {
		pair := []readTarget{e, onSingleton[i]}
		pair[0].name += apiSuffix
		pair[1].name += singletonSuffix
		// Warmed singleton first: the passes start on the replica that has the load already.
		if err := b.warmReads(ctx, []readTarget{pair[1], pair[0]}, len(ids), token); err != nil {
			return nil, err
		}
		pids := []string{strconv.Itoa(s.api.pid()), strconv.Itoa(single.pid())}
		cpu := make([]time.Duration, len(pair))
		results, err := b.mirroredPasses(ctx, []string{pair[0].name, pair[1].name}, shardsReadPasses,
			func(ctx context.Context, j int, slot time.Duration) (timings, error) {
				before := procCPU(pids[j])
				t, err := b.loadReads(ctx, pair[j], token, slot)
				cpu[j] += procCPU(pids[j]) - before
				return t, err
			})
		if err != nil {
			return nil, err
		}
		for j, t := range pair {
			out[t.name] = results[t.name].t.rate()
			cpuPerRead[t.name] = ratio(float64(cpu[j].Microseconds()), float64(results[t.name].t.calls))
		}
	}
	logf("shards: reads per second %v; the serving process's CPU µs per read %v", out, cpuPerRead)
	return out, nil
}

// shardsReadPasses is how many mirrored passes each read's two sides run in: twice the read
// path's, of half the length each.
const shardsReadPasses = 2 * readPasses

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

// reportShardsMemory: each shard holding its share of 2N sites ÷ (the controller tier
// singleton holding N + 16 MiB).
func reportShardsMemory(rep *report, half memory, sitesHalf int, mems map[string]memory, sitesFull int) {
	rep.add(scenarioShards, "sites_half", float64(sitesHalf), unitCount)
	rep.add(scenarioShards, "sites_full", float64(sitesFull), unitCount)
	rep.add(scenarioShards, "controllers_singleton_live_heap_mib_half", half.LiveBytes/mib, unitMiB)
	budget := half.LiveBytes + shardsHeapAllowanceMiB*mib
	for _, name := range []string{shardOne, shardTwo} {
		m := mems[name]
		rep.add(scenarioShards, name+"_live_heap_mib", m.LiveBytes/mib, unitMiB)
		rep.add(scenarioShards, name+"_heap_inuse_mib", m.HeapBytes/mib, unitMiB)
		rep.addTarget(scenarioShards, name+"_heap_vs_singleton_half_ratio", ratio(m.LiveBytes, budget), unitRatio,
			target{"<=", shardsHeapFactor})
	}
}

// reportShardsAPIMemory: the API replica's live heap per 1,000 sites, between its cold starts
// at N and at 2N.
func reportShardsAPIMemory(rep *report, half memory, sitesHalf int, full memory, sitesFull int) {
	rep.add(scenarioShards, "api_live_heap_mib_half", half.LiveBytes/mib, unitMiB)
	rep.add(scenarioShards, "api_live_heap_mib_full", full.LiveBytes/mib, unitMiB)
	rep.add(scenarioShards, "api_rss_mib_full", full.RSSBytes/mib, unitMiB)
	perK := float64(sitesFull-sitesHalf) / 1000
	rep.addTarget(scenarioShards, "api_live_heap_mib_per_1k_sites", ratio((full.LiveBytes-half.LiveBytes)/mib, perK), unitMiB,
		target{"<=", shardsAPIHeapPer1kMiB})
}

func reportShardsReads(rep *report, reads map[string]float64) {
	for _, name := range []string{eligibilityTarget, transactionsTarget} {
		api, single := reads[name+apiSuffix], reads[name+singletonSuffix]
		rep.add(scenarioShards, name+"_rps_api", api, unitPerSec)
		rep.add(scenarioShards, name+"_rps_singleton", single, unitPerSec)
		// Alternating: the same clients, the same sites, the two managers up at once.
		rep.addTarget(scenarioShards, name+"_api_vs_singleton_ratio", ratio(api, single), unitRatio,
			target{">=", shardsReadTarget})
	}
}
