package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/flexsite/flexsite/internal/probe"
)

// managerConfig is how the bench runs bin/manager.
type managerConfig struct {
	binary, logPath                 string
	apiAddr, metricsAddr, pprofAddr string
	// probeAddr is the manager's own /readyz (--health-probe-bind-address), where it serves
	// no REST API (--tier=controllers); empty: the REST API's /readyz.
	probeAddr string
	args      []string
}

// managerProc is the running manager, with the addresses of its REST API, metrics and pprof.
type managerProc struct {
	*childProc
	apiURL, metricsURL, pprofURL string
	readyURL                     string
}

func startManager(cfg managerConfig) (*managerProc, error) {
	p, err := startChild("manager", cfg.binary, cfg.logPath, cfg.args...)
	if err != nil {
		return nil, err
	}
	m := &managerProc{childProc: p, apiURL: "http://" + cfg.apiAddr, metricsURL: "http://" + cfg.metricsAddr + "/metrics",
		pprofURL: "http://" + cfg.pprofAddr}
	m.readyURL = m.apiURL + "/readyz"
	if cfg.probeAddr != "" {
		m.readyURL = "http://" + cfg.probeAddr + "/readyz"
	}
	return m, nil
}

// waitReady waits for the REST API's /readyz (without one, the manager's own), which turns
// 200 once the caches have synced.
func (m *managerProc) waitReady(ctx context.Context, limit time.Duration) (time.Duration, error) {
	return m.waitHTTP(ctx, probeClient, m.readyURL, limit)
}

// memory is the manager's resident set (the kernel's figure) and Go heap in use.
type memory struct {
	RSSBytes  float64
	HeapBytes float64
	// LiveBytes is the heap's live objects alone (heap_alloc after the forced GC): HeapBytes
	// less the free slots of partly used spans.
	LiveBytes float64
}

// memory forces a garbage collection first (pprof's heap?gc=1), so that the heap figure is
// what the manager holds, not what it has yet to collect; RSS is read as the kernel has it.
func (m *managerProc) memory(ctx context.Context) (memory, error) {
	if err := fetch(ctx, probeClient, m.pprofURL+"/debug/pprof/heap?gc=1"); err != nil {
		return memory{}, fmt.Errorf("forcing a GC through pprof: %w", err)
	}
	samples, err := probe.Fetch(ctx, probeClient, m.metricsURL, "go_memstats_heap_inuse_bytes", "go_memstats_heap_alloc_bytes")
	if err != nil {
		return memory{}, err
	}
	rss, err := vmRSS(m.pid())
	if err != nil {
		return memory{}, err
	}
	return memory{RSSBytes: rss, HeapBytes: probe.SumOf(samples, "go_memstats_heap_inuse_bytes"),
		LiveBytes: probe.SumOf(samples, "go_memstats_heap_alloc_bytes")}, nil
}

// vmRSS reads a process's resident set size from /proc/<pid>/status.
func vmRSS(pid int) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
		return kb * 1024, err
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// workState is the manager's controllers' progress, from its metrics.
type workState struct {
	queued, active, reconciles float64
}

func (m *managerProc) work(ctx context.Context) (workState, error) {
	samples, err := probe.Fetch(ctx, probeClient, m.metricsURL,
		"workqueue_depth", "controller_runtime_active_workers", "controller_runtime_reconcile_total")
	if err != nil {
		return workState{}, err
	}
	return workState{
		queued:     probe.SumOf(samples, "workqueue_depth"),
		active:     probe.SumOf(samples, "controller_runtime_active_workers"),
		reconciles: probe.SumOf(samples, "controller_runtime_reconcile_total"),
	}, nil
}

// quietPeriod is how long no reconcile may finish before the manager counts as idle. A
// reconcile that lost a write race comes back after 200 ms outside the queue's depth, and
// watch events of the last writes may still be on their way; a second covers both.
const quietPeriod = time.Second

// waitIdle waits until every workqueue is empty, no reconcile runs and none has finished for
// quietPeriod. It returns the reconciles counted when it went idle.
func (m *managerProc) waitIdle(ctx context.Context, limit time.Duration) (float64, error) {
	deadline := time.Now().Add(limit)
	var last workState
	quietSince := time.Time{}
	for {
		w, err := m.work(ctx)
		if err != nil {
			return 0, err
		}
		switch {
		case w.queued > 0 || w.active > 0 || w.reconciles != last.reconciles:
			quietSince = time.Time{}
		case quietSince.IsZero():
			quietSince = time.Now()
		case time.Since(quietSince) >= quietPeriod:
			return w.reconciles, nil
		}
		last = w
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("manager still busy after %s (queued %.0f, active %.0f)", limit, w.queued, w.active)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}
