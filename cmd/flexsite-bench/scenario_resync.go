package main

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// runResync restarts the manager once everything has settled. A cold start reconciles every
// object: the idle resync at its most thorough. With nothing changed it should write nothing
// (scenario 5, second half); it is also the cold start of scenario 4, with the whole fleet.
func runResync(ctx context.Context, b *bench, rep *report) error {
	if _, err := b.mgr.waitIdle(ctx, b.p.Settle); err != nil {
		return err
	}
	sites := &flexv1.SiteList{}
	if err := b.watch.cache.List(ctx, sites); err != nil {
		return err
	}
	b.mgr.stop()
	before, err := b.requests.snapshot(ctx)
	if err != nil {
		return err
	}
	start := time.Now()
	mgr, err := startManager(b.mgrCfg)
	if err != nil {
		return err
	}
	b.mgr = mgr
	ready, err := mgr.waitReady(ctx, b.p.Settle)
	if err != nil {
		return err
	}
	reconciles, err := mgr.waitIdle(ctx, b.p.Settle)
	if err != nil {
		return err
	}
	// waitIdle returns after a quiet second; the reconciling itself ended that much earlier.
	drained := time.Since(start) - quietPeriod
	after, err := b.requests.snapshot(ctx)
	if err != nil {
		return err
	}
	writes := after.minus(before).where(isWrite)
	// Before it is ready, the manager creates the default rules that do not exist yet
	// (--install-default-rules): against existing ones those are refused creates, not changes.
	startup := writes.where(isRuleInstall)
	resync := writes.where(func(k requestKey) bool { return !isRuleInstall(k) })
	logf("cold start with %d sites: ready in %s, %0.f reconciles done after %s; writes: %s (rule install: %s)",
		len(sites.Items), ready.Round(time.Millisecond), reconciles, drained.Round(time.Millisecond),
		resync.perUnitString(1), startup.perUnitString(1))

	rep.add("scale", "cold_start_sites", float64(len(sites.Items)), unitCount)
	rep.add("scale", "cold_start_ready_seconds", ready.Seconds(), unitSeconds)
	rep.add("scale", "cold_start_reconciled_seconds", drained.Seconds(), unitSeconds)
	// The heap of a manager that started with the whole fleet: what holding it costs, without
	// what onboarding it leaves behind for a while (the Event recorder's de-duplication cache
	// keeps each Event for minutes, status-write records for 30 s, spans left part-used by
	// the onboards' garbage), which the scale figure taken right after the onboards includes.
	if b.empty != nil && len(sites.Items) > 0 {
		m, err := mgr.memory(ctx)
		if err != nil {
			return err
		}
		// What it is made of: go tool pprof -base bench/heap-empty.pb.gz bench/heap-cold-start.pb.gz
		// (GODEBUG=memprofilerate=4096 make bench: a finer sample than the default 512 KiB).
		profile := filepath.Join(filepath.Dir(b.mgrCfg.logPath), "heap-cold-start.pb.gz")
		if err := saveURL(ctx, mgr.pprofURL+"/debug/pprof/heap", profile); err != nil {
			return fmt.Errorf("heap profile: %w", err)
		}
		perK := float64(len(sites.Items)) / 1000
		rep.add("scale", "cold_start_heap_mib_per_1k_sites", (m.HeapBytes-b.empty.HeapBytes)/mib/perK, unitMiB)
		rep.add("scale", "cold_start_heap_live_mib_per_1k_sites", (m.LiveBytes-b.empty.LiveBytes)/mib/perK, unitMiB)
		logf("after the cold start: heap %.0f MiB in use, %.0f MiB live, RSS %.0f MiB", m.HeapBytes/mib, m.LiveBytes/mib, m.RSSBytes/mib)
	}
	rep.add("resync", "reconciles", reconciles, unitCount)
	rep.addTarget("resync", "writes", resync.total(), unitCount, target{"==", 0})
	rep.add("resync", "startup_rule_install_requests", startup.total(), unitCount)
	rep.detail("resync_writes", resync.perUnit(1))
	return nil
}

// isRuleInstall is the manager's startup creation of the default Propositions and
// AssetModels, answered 409 when they exist.
func isRuleInstall(k requestKey) bool {
	return k.Verb == "POST" && k.Code == "409" && slices.Contains([]string{"propositions", "assetmodels"}, k.Resource)
}
