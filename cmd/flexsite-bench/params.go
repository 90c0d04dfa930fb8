package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// fleetSizes overrides the mode's fleet sizes (ScaleLevels), e.g. "1000,5000": a quick run at
// the full run's fleet, for a figure that grows with the fleet, without the full run's length.
var fleetSizes = flag.String("fleet-sizes", "", "Fleet sizes of the scale step, comma-separated (\"\": the mode's).")

// params are the sizes of one run.
type params struct {
	Mode string `json:"mode"`
	// Onboards is N of scenario 1, per side (REST and raw).
	Onboards int `json:"onboards"`
	// Concurrency is C: concurrent clients for onboards, raw writes, ledgers and reads.
	Concurrency int `json:"concurrency"`
	// ConvergenceSamples is how many writes of each kind scenario 2 times.
	ConvergenceSamples int `json:"convergence_samples_per_kind"`
	// ReadSeconds is how long each read target is loaded, in total.
	ReadSeconds float64 `json:"read_seconds"`
	// ScaleLevels are the fleet sizes of scenario 4 (households in the cluster).
	ScaleLevels []int `json:"scale_levels"`
	// ScaleProbe is how many timed onboards (and as many raw-write households) measure the
	// onboard latency at each level.
	ScaleProbe int `json:"scale_probe_onboards"`
	// FanoutProbe is how many timed onboards, idle and again during a catalogue change,
	// compare their p99s. The p99 of 200 is the second-worst onboard: two full runs of the
	// same code measured an idle p99 of 109 and of 43 ms with 200.
	FanoutProbe int `json:"fanout_probe_onboards"`
	// Transactions per reward ledger: a year of weekly rewards.
	Transactions int `json:"transactions_per_ledger"`
	// Settle bounds how long the bench waits for the manager to go idle, or for a change to
	// reach every site's status.
	Settle time.Duration `json:"-"`
}

// paramsFor picks the full scale, or the quick run that fits in five minutes on two
// shared cores; -onboards and -concurrency override either.
func paramsFor(o options) params {
	p := params{
		Mode: "full", Onboards: 2000, Concurrency: 16, ConvergenceSamples: 200, ReadSeconds: 30,
		ScaleLevels: []int{1000, 10000}, ScaleProbe: 200, FanoutProbe: 1000, Transactions: 52,
		Settle: 30 * time.Minute,
	}
	if o.quick {
		p = params{
			Mode: modeQuick, Onboards: 200, Concurrency: 8, ConvergenceSamples: 80, ReadSeconds: 6,
			ScaleLevels: []int{200, 1000}, ScaleProbe: 100, FanoutProbe: 200, Transactions: 52,
			Settle: 5 * time.Minute,
		}
	}
	if o.onboards > 0 {
		p.Onboards = o.onboards
	}
	if o.concurrency > 0 {
		p.Concurrency = o.concurrency
	}
	if *fleetSizes != "" {
		p.ScaleLevels = nil
		for _, f := range strings.Split(*fleetSizes, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				fmt.Fprintf(os.Stderr, "-fleet-sizes: %q is not a number of sites\n", f)
				os.Exit(2)
			}
			p.ScaleLevels = append(p.ScaleLevels, n)
		}
	}
	return p
}

func (p params) describe() string {
	s := fmt.Sprintf("N=%d onboards per side, C=%d, fleet %v households, %d convergence samples per kind, %gs per read target",
		p.Onboards, p.Concurrency, p.ScaleLevels, p.ConvergenceSamples, p.ReadSeconds)
	if p.Mode == "full" {
		s += " (full scale takes long: tens of thousands of API writes on shared cores; BENCH_QUICK=1 for a 5-minute run)"
	}
	return s
}

var benchStart = time.Now()

// logf prints progress to stderr, stamped with the time since the start.
func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%7s] %s\n", time.Since(benchStart).Truncate(time.Second), fmt.Sprintf(format, args...))
}

// modeQuick is the mode of BENCH_QUICK=1: the smaller fleet, under 5 minutes.
const modeQuick = "quick"
