// Command flexsite-bench measures Flexsite against the limit of its design: the API server's
// own write path. It starts an embedded control plane (etcd + kube-apiserver) in-process and
// the manager (bin/manager) as a subprocess, so that the memory it reports is the manager's
// alone, then runs the scenarios of the performance issue:
//
//  1. REST onboards against writing the same objects straight through client-go;
//  2. eligibility convergence (write -> Site.status) against the API server's own
//     write -> watch-event latency, and a catalogue change over every site;
//  3. the read path against a trivial net/http handler; the transactions page read cold (no
//     kept pages) against a handler running the same SQL (scenario_txcold.go);
//  4. memory, onboard latency and cold start at two fleet sizes;
//  5. API writes per onboard, and writes during an idle resync (a manager restart);
//  6. notifications;
//  7. readings through POST /data/readings against a raw COPY of the same rows;
//     dispatch status callbacks against the readings route's requests;
//  8. the manager as two shards against the singleton (the shards step: it runs first, on
//     households of its own, restarts the manager in other modes, and leaves the cluster as it
//     found it, runScenarios);
//  9. the read path's CPU per read at two fleet sizes (the fleet step, last: it grows the fleet);
//  10. the OpenADR door: a VEN's report against the REST callback of the same change, and a
//     VEN's event search against the same SQL (scenario_openadr.go).
//
// The machines this runs on are shared and noisy, so every target is a ratio of two figures
// measured in the same run, and nothing here passes or fails on a timing: the run prints a
// table and writes bench/results.json for comparing runs. `make bench` runs the full scale
// (long: it creates 10,000 households); BENCH_QUICK=1 a smaller version of every scenario.
//
// Linux only: it reads the manager's memory from /proc.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
)

type options struct {
	binDir      string
	manager     string
	out         string
	logDir      string
	quick       bool
	onboards    int
	concurrency int
	only        string
	// trivialAddr, when set, makes this process the trivial HTTP server of the read-path
	// baseline instead of the bench (the bench starts itself again in that role).
	trivialAddr string
}

func main() {
	var o options
	quick, _ := strconv.ParseBool(os.Getenv("BENCH_QUICK"))
	flag.StringVar(&o.binDir, "bin-dir", "bin/k8s/1.37.1", "Directory of etcd and kube-apiserver (hack/ensure-k8s-binaries.sh).")
	flag.StringVar(&o.manager, "manager", "bin/manager", "The manager binary to measure.")
	flag.StringVar(&o.out, "out", "bench/results.json", "Where to write the figures as JSON.")
	flag.StringVar(&o.logDir, "log-dir", "bench", "Where the manager's log goes (manager.log).")
	flag.BoolVar(&o.quick, "quick", quick, "Run the smaller version of every scenario ($BENCH_QUICK).")
	flag.IntVar(&o.onboards, "onboards", 0, "Onboards per side in scenario 1 (0: the mode's default).")
	flag.IntVar(&o.concurrency, "concurrency", 0, "Concurrent clients C (0: the mode's default).")
	flag.StringVar(&o.only, "only", "", "Run only these scenarios (comma-separated step names, e.g. \"notifications\").")
	flag.StringVar(&o.trivialAddr, "trivial-server", "", "Internal: serve the trivial read-path baseline on this address.")
	flag.Parse()

	if o.trivialAddr != "" {
		if err := serveTrivial(o.trivialAddr); err != nil {
			fmt.Fprintln(os.Stderr, "trivial server:", err)
			os.Exit(1)
		}
		return
	}
	// Ctrl-C cancels the run; run's deferred cleanup then stops the manager and the control
	// plane (envtest starts those in their own process group, out of the terminal's reach).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	err := run(ctx, o)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "flexsite-bench:", err)
		os.Exit(1)
	}
}

// run starts everything, runs the scenarios in order and reports. The report is printed and
// written even when a scenario fails, with what was measured up to then.
func run(ctx context.Context, o options) error {
	p := paramsFor(o)
	logf("mode %s: %s", p.Mode, p.describe())
	rep := newReport(p)
	var b *bench
	var err error
	if o.only == scenarioSettlement || o.only == scenarioEVSchedule {
		// Settlement needs no control plane and no manager: its own PostgreSQL only. The EV
		// schedule is a pure function: nothing at all.
		b = &bench{p: p}
	} else {
		if b, err = newBench(ctx, o, p); err != nil {
			return err
		}
		defer b.close()
	}

	runErr := runScenarios(ctx, b, rep, o.only)
	if runErr != nil {
		rep.Error = runErr.Error()
	}
	rep.finish()
	rep.printTable(os.Stdout)
	if err := rep.write(o.out); err != nil {
		return err
	}
	if b.mgrCfg.logPath != "" {
		logf("wrote %s; manager log in %s", o.out, b.mgrCfg.logPath)
	} else {
		logf("wrote %s", o.out)
	}
	return runErr
}

// runScenarios runs the scenarios in an order that lets each build on the last: the fleet is
// grown first, so the catalogue change, the onboard comparison, the reads and the cold start
// all run against the full fleet, as they would in production.
//
// The shards step runs before that, right after the empty manager is measured: its figures
// are at N sites and 2N (quick: 500 and 1,000), which it grows itself on an empty cluster. Run
// later, it would find the thousands of households the other steps leave (a whole quick run
// holds ~3,350 by the end), take them as N, and wait for the sharder to move a ring of ~33,000
// objects at its client rate, past the step's bounds. It leaves the cluster as it found it for
// the steps after it: its households deleted (by its shard, before the tiers stop) and the
// singleton back, so that the scale step starts from an empty cluster and the manager the
// others measure is the singleton, started afresh.
func runScenarios(ctx context.Context, b *bench, rep *report, only string) error {
	type step struct {
		name string
		run  func(context.Context, *bench, *report) error
	}
	steps := []step{
		{"baseline memory", measureEmpty},
		{scenarioShards, runShards},
		{"scale", runScale},
		{"catalogue change", runCatalogue},
		{"onboard vs raw writes", runOnboard},
		{"eligibility convergence", runConvergence},
		{"read path", runReads},
		{scenarioTxCold, runTxCold},
		{"idle resync", runResync},
		{"notifications", runNotifications},
		{dispatchScenario, runDispatch},
		{readingsScenario, runReadings},
		{callbacksScenario, runCallbacks},
		{openADRScenario, runOpenADR},
		{scenarioSettlement, runSettlement},
		{hostileScenario, runHostile},
		{scenarioEVSchedule, runEVSchedule},
		{scenarioPricing, runPricing},
		{scenarioMeters, runMeters},
		{scenarioFleet, runFleet},
	}
	selected := func(name string) bool { return only == "" || slices.Contains(strings.Split(only, ","), name) }
	for i, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !selected(s.name) {
			continue
		}
		b.later = slices.ContainsFunc(steps[i+1:], func(next step) bool { return selected(next.name) })
		logf("== %s", s.name)
		if err := s.run(ctx, b, rep); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
	}
	return nil
}
