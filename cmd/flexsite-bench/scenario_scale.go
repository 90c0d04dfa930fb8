package main

import (
	"context"

	"fmt"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

const mib = 1 << 20

// heapBudgetMiBPer1k is the manager heap 1,000 sites may cost.
const heapBudgetMiBPer1k = 15

// measureEmpty records the manager's memory before any household exists: the floor under
// the per-1,000-sites figures.
func measureEmpty(ctx context.Context, b *bench, rep *report) error {
	m, err := b.mgr.memory(ctx)
	if err != nil {
		return err
	}
	// The profile the cold start's (heap-cold-start.pb.gz) is read against (pprof -base).
	if err := saveURL(ctx, b.mgr.pprofURL+"/debug/pprof/heap", filepath.Join(filepath.Dir(b.mgrCfg.logPath), "heap-empty.pb.gz")); err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	rep.add("scale", "heap_mib_empty", m.HeapBytes/mib, unitMiB)
	rep.add("scale", "rss_mib_empty", m.RSSBytes/mib, unitMiB)
	b.empty = &m
	return nil
}

// fleetRawNamespace holds the raw-write households of each level's probe.
const fleetRawNamespace = "bench-fleet-raw"

// fleetRawHouseholds are the raw-write households of fleetRawNamespace, made (with the
// namespace) on first use: the scale step's probes and the fleet step's raw side share them,
// and their MPANs.
func (b *bench) fleetRawHouseholds(ctx context.Context) (*households, error) {
	if b.fleetRaw == nil {
		if err := b.namespace(ctx, fleetRawNamespace); err != nil {
			return nil, err
		}
		b.fleetRaw = newHouseholds(fleetRawNamespace, 14)
	}
	return b.fleetRaw, nil
}

// level is what scenario 4 measures at one fleet size.
type level struct {
	sites int
	probe comparison
	mem   memory
}

// runScale grows the fleet to each level (households with two assets, an enrolment and a
// year of weekly rewards) and measures memory and onboard latency there. Memory per 1,000
// sites is the difference between the two levels, so the manager's fixed cost drops out.
func runScale(ctx context.Context, b *bench, rep *report) error {
	fleet, err := b.organisation(ctx, "bench-fleet", 10)
	if err != nil {
		return err
	}
	b.fleet = fleet
	raw, err := b.fleetRawHouseholds(ctx)
	if err != nil {
		return err
	}
	var levels []level
	for _, size := range b.p.ScaleLevels {
		l, err := b.growFleet(ctx, size, raw)
		if err != nil {
			return err
		}
		levels = append(levels, l)
	}
	reportScale(rep, levels[0], levels[len(levels)-1])
	// Every site of the fleet has its year of rewards by now (the last level waited for the
	// manager to be idle: ledgers made and summarised).
	return measureEtcdPerSite(ctx, b, rep, fleet.ns)
}

func reportScale(rep *report, small, large level) {
	perK := float64(large.sites-small.sites) / 1000
	rep.add("scale", "sites_small", float64(small.sites), unitCount)
	rep.add("scale", "sites_large", float64(large.sites), unitCount)
	rep.add("scale", "heap_mib_small", small.mem.HeapBytes/mib, unitMiB)
	rep.add("scale", "heap_mib_large", large.mem.HeapBytes/mib, unitMiB)
	rep.add("scale", "rss_mib_small", small.mem.RSSBytes/mib, unitMiB)
	rep.add("scale", "rss_mib_large", large.mem.RSSBytes/mib, unitMiB)
	heapPerK := (large.mem.HeapBytes - small.mem.HeapBytes) / mib / perK
	rep.add("scale", "heap_mib_per_1k_sites", heapPerK, unitMiB)
	// The budget: 15 MiB of heap per 1,000 sites (each with a year of weekly rewards).
	rep.addTarget("scale", "heap_per_1k_sites_vs_15mib_ratio", heapPerK/heapBudgetMiBPer1k, unitRatio, target{"<=", 1})
	rep.add("scale", "rss_mib_per_1k_sites", (large.mem.RSSBytes-small.mem.RSSBytes)/mib/perK, unitMiB)
	// The heap in use counts the free slots of partly used spans too (a third of it here):
	// the live objects alone, for what the data itself costs.
	rep.add("scale", "heap_live_mib_per_1k_sites", (large.mem.LiveBytes-small.mem.LiveBytes)/mib/perK, unitMiB)
	restSmall, restLarge := small.probe.rest.percentileMS(50), large.probe.rest.percentileMS(50)
	rawSmall, rawLarge := small.probe.raw.percentileMS(50), large.probe.raw.percentileMS(50)
	rep.add("scale", "onboard_p50_ms_small", restSmall, unitMS)
	rep.add("scale", "onboard_p50_ms_large", restLarge, unitMS)
	rep.addTarget("scale", "onboard_p50_large_vs_small_ratio", ratio(restLarge, restSmall), unitRatio, target{"<=", 1.2})
	// The same growth of the raw write path, measured alongside: what the API server and etcd
	// themselves slow down by, and the REST growth with that taken out.
	rep.add("scale", "raw_p50_large_vs_small_ratio", ratio(rawLarge, rawSmall), unitRatio)
	rep.add("scale", "onboard_p50_growth_vs_raw_growth_ratio", ratio(ratio(restLarge, restSmall), ratio(rawLarge, rawSmall)), unitRatio)
}

// growFleet onboards households until the cluster holds size of them: the last of them are
// the probe, ScaleProbe REST onboards timed against as many raw-write households on an idle
// manager. Every new household gets its reward ledger.
func (b *bench) growFleet(ctx context.Context, size int, raw *households) (level, error) {
	current, err := b.siteCount(ctx)
	if err != nil {
		return level{}, err
	}
	if fill := size - current - 2*b.p.ScaleProbe; fill > 0 {
		if err := b.fillFleet(ctx, fill); err != nil {
			return level{}, err
		}
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return level{}, err
	}
	probe, err := b.compare(ctx, b.fleet, raw, b.p.ScaleProbe)
	if err != nil {
		return level{}, err
	}
	if err := b.writeLedgers(ctx, b.fleet.ns, probe.restNames); err != nil {
		return level{}, err
	}
	if err := b.writeLedgers(ctx, raw.ns, probe.rawNames); err != nil {
		return level{}, err
	}
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return level{}, err
	}
	sites, err := b.siteCount(ctx)
	if err != nil {
		return level{}, err
	}
	mem, err := b.mgr.memory(ctx)
	if err != nil {
		return level{}, err
	}
	// The heap profile at each level: what the memory per site is made of.
	heapPath := filepath.Join(filepath.Dir(b.mgrCfg.logPath), fmt.Sprintf("heap-%d-sites.pb.gz", size))
	if err := saveURL(ctx, b.mgr.pprofURL+"/debug/pprof/heap", heapPath); err != nil {
		return level{}, fmt.Errorf("heap profile: %w", err)
	}
	logf("%d sites: onboard p50 %.1f ms (raw %.1f ms), heap %.0f MiB, RSS %.0f MiB", sites,
		probe.rest.percentileMS(50), probe.raw.percentileMS(50), mem.HeapBytes/mib, mem.RSSBytes/mib)
	return level{sites: sites, probe: probe, mem: mem}, nil
}

// fillFleet onboards n new households into the fleet through the REST API and credits each
// its year of rewards.
func (b *bench) fillFleet(ctx context.Context, n int) error {
	t, names, err := b.onboardREST(ctx, b.fleet, n)
	if err != nil {
		return err
	}
	logf("fleet fill: %d onboards in %s (%.1f/s, p50 %.1f ms)", n, t.wall.Round(time.Millisecond), t.rate(), t.percentileMS(50))
	return b.writeLedgers(ctx, b.fleet.ns, names)
}

// siteCount is how many Sites the cluster holds, as the bench's watch sees them.
func (b *bench) siteCount(ctx context.Context) (int, error) {
	sites := &flexv1.SiteList{}
	if err := b.watch.cache.List(ctx, sites); err != nil {
		return 0, err
	}
	return len(sites.Items), nil
}

// siteCountIn is how many Sites namespace ns holds, as the bench's watch sees them.
func (b *bench) siteCountIn(ctx context.Context, ns string) (int, error) {
	sites := &flexv1.SiteList{}
	if err := b.watch.cache.List(ctx, sites, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	return len(sites.Items), nil
}

// writeLedgers credits each site a year of weekly rewards, as a rewards system feeds Flexsite
// now: every transaction in PostgreSQL (internal/rewardstore, the SQL POST
// /rewards/{site_id}/transactions runs), the site's RewardLedger made and summarised by the
// manager's controller.
func (b *bench) writeLedgers(ctx context.Context, ns string, siteNames []string) error {
	t, err := runConcurrent(ctx, len(siteNames), b.p.Concurrency, func(ctx context.Context, i int) error {
		site := &flexv1.Site{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: ns, Name: siteNames[i]}, site); err != nil {
			return err
		}
		key := rewardstore.Site{Namespace: ns, ID: site.Labels[flexv1.IDLabel]}
		// A year at once (one SQL transaction): the history a site has, not its weekly arrival.
		return b.rewards.AppendMany(ctx, key, newLedger(ns, siteNames[i], b.p.Transactions).Spec.Transactions, rewardstore.SourceAPI)
	})
	if err != nil {
		return fmt.Errorf("crediting reward history: %w", err)
	}
	logf("%d reward histories in %s (%.1f/s)", len(siteNames), t.wall.Round(time.Millisecond), t.rate())
	return nil
}

// onboardREST onboards n new households of o at C concurrent clients, and records their
// site ids and names on o.
func (b *bench) onboardREST(ctx context.Context, o *org, n int) (timings, []string, error) {
	ids, names := make([]string, n), make([]string, n)
	t, err := runConcurrent(ctx, n, b.p.Concurrency, func(ctx context.Context, i int) error {
		mpan := o.h.mpan()
		var resp onboardResponse
		if err := o.api.call(ctx, "POST", "/entities/site/onboard", onboardBody(mpan), &resp); err != nil {
			return err
		}
		// Every household is new, so each answer must report a site and an enrolment created.
		if resp.Site.SiteID == "" || resp.Enrolment.Status != "enrolled" {
			return fmt.Errorf("onboard of MPAN %s answered site %q, enrolment %q", mpan, resp.Site.SiteID, resp.Enrolment.Status)
		}
		ids[i], names[i] = resp.Site.SiteID, identity.SiteNameForMPAN(mpan)
		return nil
	})
	if err != nil {
		return timings{}, nil, err
	}
	o.mu.Lock()
	o.siteIDs = append(o.siteIDs, ids...)
	o.siteNames = append(o.siteNames, names...)
	o.mu.Unlock()
	return t, names, nil
}
