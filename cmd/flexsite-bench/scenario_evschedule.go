package main

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"time"

	"github.com/flexsite/flexsite/internal/evschedule"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
)

// EV schedule (issue 36): the CPU time of one evschedule.Plan over a 48-period horizon, the
// rule POST …/event/plug-in-schedule applies. It is a pure function, so it needs no cluster,
// no manager and no database: the process's own CPU time (getrusage: user + system, GC
// included) over many calls, in rounds, the median round reported.

const (
	scenarioEVSchedule = "ev-schedule"
	labelEVSchedule    = "12 ev schedule"
	unitUS             = "µs"
)

func init() { scenarioLabels[scenarioEVSchedule] = labelEVSchedule }

// evScheduleInput is a realistic 48-period request: plugged in at 18:00 UK time asking for
// 4 hours (n = 8) in two blocks, ready by 18:00 the next day (the window is 48 half-hours,
// every one priced), a tariff with overnight off-peak times the car may not charge outside,
// and a turn-down dispatch of an hour.
func evScheduleInput() evschedule.Input {
	day := prices.DayOf(time.Now()).Next()
	from := day.At(18, 0)
	ready := 18 * time.Hour
	in := evschedule.Input{
		Requested: []evschedule.Block{
			{Start: from, End: from.Add(3 * time.Hour)},
			{Start: from.Add(5 * time.Hour), End: from.Add(6 * time.Hour)},
		},
		Intent: &evschedule.Intent{ReadyBy: &ready, MayChargePeak: false},
		Tariff: &evschedule.Tariff{Zone: settlement.London,
			OffPeak: []validation.MinuteRange{{Start: 0, End: 5*60 + 30}, {Start: 23*60 + 30, End: 24 * 60}}},
		TurnDown: []evschedule.Block{{Start: from.Add(8 * time.Hour), End: from.Add(9 * time.Hour)}},
	}
	for i := range 48 {
		// A day-ahead-like curve in £/MWh: dear evening, cheap small hours, with ties.
		in.Prices = append(in.Prices, prices.Price{Start: from.Add(time.Duration(i) * prices.HalfHour),
			Centi: prices.Centi(4000 + (i*7919)%6000/100*100)})
	}
	return in
}

// processCPU is this process's CPU time so far.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runEVSchedule(_ context.Context, b *bench, rep *report) error {
	in := evScheduleInput()
	s := evschedule.Plan(in)
	if !s.Changed || s.Candidates < 40 || s.Needed != 8 {
		return fmt.Errorf("the bench's input is not a 48-period plan: n %d, %d candidates, changed %v", s.Needed, s.Candidates, s.Changed)
	}
	calls, rounds := 20000, 11
	if b.p.Mode == modeQuick {
		calls, rounds = 5000, 5
	}
	for range calls { // warm-up
		evschedule.Plan(in)
	}
	perCall := make([]float64, rounds)
	for r := range rounds {
		cpu0 := processCPU()
		for range calls {
			evschedule.Plan(in)
		}
		perCall[r] = float64(processCPU()-cpu0) / float64(time.Microsecond) / float64(calls)
	}
	slices.Sort(perCall)
	logf("ev schedule: %d rounds of %d plans, CPU per plan %.2f–%.2f µs", rounds, calls, perCall[0], perCall[rounds-1])
	rep.addTarget(scenarioEVSchedule, "cpu_per_plan_48_us", perCall[rounds/2], unitUS, target{Op: "<=", Bound: 50})
	rep.detail("ev_schedule_cpu_per_plan_us", perCall)
	return nil
}
