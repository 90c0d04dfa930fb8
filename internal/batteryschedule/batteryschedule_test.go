package batteryschedule_test

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	bs "github.com/flexsite/flexsite/internal/batteryschedule"
	"github.com/flexsite/flexsite/internal/prices"
)

const hh = 30 * time.Minute

// midnight is 27 November 2026, 00:00 UK time (GMT: UTC).
var midnight = time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)

func at(h, m int) time.Time {
	return midnight.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

// priced prices the half-hours from midnight in order, in £/MWh; a negative entry of -1 is a
// gap (no declared price).
func priced(pounds ...float64) []prices.Price {
	var out []prices.Price
	for i, p := range pounds {
		if p == -1 {
			continue
		}
		out = append(out, prices.Price{Start: midnight.Add(time.Duration(i) * hh), Centi: prices.Centi(p * 100)})
	}
	return out
}

type step struct {
	from, to string // HH:MM from midnight
	action   bs.Action
	allow    bool
}

func hm(s string) time.Time {
	var h, m int
	if _, err := fmt.Sscanf(s, "%d:%d", &h, &m); err != nil {
		panic(err)
	}
	return at(h, m)
}

func show(steps []bs.Step) string {
	out := ""
	for _, s := range steps {
		out += fmt.Sprintf("\n  %s–%s %s %v", s.Start.UTC().Format("15:04"), s.End.UTC().Format("15:04"), s.Action, s.AllowDeviation)
	}
	return out
}

// Worked examples, by hand, in the spec's terms.
func TestPlanWorkedExamples(t *testing.T) {
	dispatches := []bs.Dispatch{
		{Start: at(2, 0), End: at(2, 30)},                // a turn-down: slot 02:00
		{Start: at(0, 30), End: at(1, 15), TurnUp: true}, // a turn-up over 00:30 and 01:00
		{Start: at(3, 0), End: at(3, 30), TurnUp: true},  // a turn-up and …
		{Start: at(3, 10), End: at(3, 20)},               // … a turn-down inside it: the turn-down's
	}
	for _, tc := range []struct {
		name  string
		in    bs.Input
		want  []step
		value int64 // in tenths of hundredths (Value's unit)
	}{
		{
			// A night at £50 (00:00–02:00) and an evening at £100 (02:00–04:00); 5 kWh at 5 kW:
			// k = ceil(5 / 2.5) = 2. Every (cheap, dear) pair is worth 0.9 × 100 − 50 = £40;
			// ties to the earliest c then d: (00:00, 02:00), then (00:30, 02:30).
			name: "two prices, k limits the pairs",
			in:   bs.Input{From: at(0, 0), To: at(4, 0), Prices: priced(50, 50, 50, 50, 100, 100, 100, 100), CapacityWh: 5000, PowerW: 5000},
			want: []step{{"00:00", "01:00", bs.ChargeMax, true}, {"01:00", "02:00", bs.AvoidExport, true},
				{"02:00", "03:00", bs.DischargeMax, true}, {"03:00", "04:00", bs.AvoidExport, true}},
			value: 2 * (9*10000 - 10*5000),
		},
		{
			// k = ceil(20 / 2.5) = 8, but only four pairs are worth anything: after them the
			// only pairs left would be cheap-cheap or dear-dear, and 0.9 × p − p < 0.
			name:  "more capacity than profitable pairs",
			in:    bs.Input{From: at(0, 0), To: at(4, 0), Prices: priced(50, 50, 50, 50, 100, 100, 100, 100), CapacityWh: 20000, PowerW: 5000},
			want:  []step{{"00:00", "02:00", bs.ChargeMax, true}, {"02:00", "04:00", bs.DischargeMax, true}},
			value: 4 * (9*10000 - 10*5000),
		},
		{
			// 100 then 105: 0.9 × 105 − 100 = −5.5 ≤ 0, no pair: everything avoid_export.
			name: "no profitable pair (the 0.9 factor)",
			in:   bs.Input{From: at(0, 0), To: at(1, 0), Prices: priced(100, 105), CapacityWh: 10000, PowerW: 5000},
			want: []step{{"00:00", "01:00", bs.AvoidExport, true}},
		},
		{
			// 100 then 112: 0.9 × 112 − 100 = 0.8 > 0: one pair.
			name:  "a barely profitable pair",
			in:    bs.Input{From: at(0, 0), To: at(1, 0), Prices: priced(100, 112), CapacityWh: 10000, PowerW: 5000},
			want:  []step{{"00:00", "00:30", bs.ChargeMax, true}, {"00:30", "01:00", bs.DischargeMax, true}},
			value: 9*11200 - 10*10000,
		},
		{
			// 90 then 100: 0.9 × 100 − 90 = 0 exactly, not > 0: no pair.
			name: "a pair worth nothing is not taken",
			in:   bs.Input{From: at(0, 0), To: at(1, 0), Prices: priced(90, 100), CapacityWh: 10000, PowerW: 5000},
			want: []step{{"00:00", "01:00", bs.AvoidExport, true}},
		},
		{
			// £10, £20, £1, £10, k = 1: (00:00, 00:30) and (01:00, 01:30) are both worth
			// 0.9 × 20 − 10 = 0.9 × 10 − 1 = £8: ties to the earliest c, 00:00.
			name: "ties to the earliest c",
			in:   bs.Input{From: at(0, 0), To: at(2, 0), Prices: priced(10, 20, 1, 10), CapacityWh: 2500, PowerW: 5000},
			want: []step{{"00:00", "00:30", bs.ChargeMax, true}, {"00:30", "01:00", bs.DischargeMax, true},
				{"01:00", "02:00", bs.AvoidExport, true}},
			value: 9*2000 - 10*1000,
		},
		{
			// £10, £10, £20, £20, k = 1: four pairs worth £8; the earliest c is 00:00, and of
			// its pairs the earliest d is 01:00.
			name: "ties to the earliest c, then the earliest d",
			in:   bs.Input{From: at(0, 0), To: at(2, 0), Prices: priced(10, 10, 20, 20), CapacityWh: 2500, PowerW: 5000},
			want: []step{{"00:00", "00:30", bs.ChargeMax, true}, {"00:30", "01:00", bs.AvoidExport, true},
				{"01:00", "01:30", bs.DischargeMax, true}, {"01:30", "02:00", bs.AvoidExport, true}},
			value: 9*2000 - 10*1000,
		},
		{
			// The dispatches fix 00:30 and 01:00 (charge_max, turn-up), 02:00 (discharge_max,
			// turn-down) and 03:00 (both: the turn-down's), with allow_deviation false. Of the
			// free half-hours 00:00 (£10), 01:30 (£10), 02:30 (£100), 03:30 (£10), the best pair
			// is (00:00, 02:30), worth £80; then (01:30, 03:30) is worth −£1: stop. 02:00 and
			// 02:30 are both discharge_max but not merged: one may deviate, the other not.
			name: "dispatches take precedence",
			in: bs.Input{From: at(0, 0), To: at(4, 0), Prices: priced(10, 10, 10, 10, 100, 100, 10, 10),
				CapacityWh: 10000, PowerW: 5000, Dispatches: dispatches},
			want: []step{{"00:00", "00:30", bs.ChargeMax, true}, {"00:30", "01:30", bs.ChargeMax, false},
				{"01:30", "02:00", bs.AvoidExport, true}, {"02:00", "02:30", bs.DischargeMax, false},
				{"02:30", "03:00", bs.DischargeMax, true}, {"03:00", "03:30", bs.DischargeMax, false},
				{"03:30", "04:00", bs.AvoidExport, true}},
			value: 9*10000 - 10*1000,
		},
		{
			// No capacity: k = 0, only the dispatches' steps and avoid_export.
			name: "no capacity",
			in: bs.Input{From: at(0, 0), To: at(4, 0), Prices: priced(10, 10, 10, 10, 100, 100, 10, 10),
				PowerW: 5000, Dispatches: dispatches},
			want: []step{{"00:00", "00:30", bs.AvoidExport, true}, {"00:30", "01:30", bs.ChargeMax, false},
				{"01:30", "02:00", bs.AvoidExport, true}, {"02:00", "02:30", bs.DischargeMax, false},
				{"02:30", "03:00", bs.AvoidExport, true}, {"03:00", "03:30", bs.DischargeMax, false},
				{"03:30", "04:00", bs.AvoidExport, true}},
		},
		{
			// No power: the same.
			name: "no power",
			in:   bs.Input{From: at(0, 0), To: at(1, 0), Prices: priced(10, 100), CapacityWh: 5000},
			want: []step{{"00:00", "01:00", bs.AvoidExport, true}},
		},
		{
			// Half-hours without a price are never paired: 00:30 (£1) and 01:00 (£200) are gaps;
			// the pair is (00:00, 01:30).
			name: "gaps are not paired",
			in:   bs.Input{From: at(0, 0), To: at(2, 0), Prices: priced(10, -1, -1, 50), CapacityWh: 10000, PowerW: 5000},
			want: []step{{"00:00", "00:30", bs.ChargeMax, true}, {"00:30", "01:30", bs.AvoidExport, true},
				{"01:30", "02:00", bs.DischargeMax, true}},
			value: 9*5000 - 10*1000,
		},
	} {
		got := bs.Plan(tc.in)
		ok := len(got) == len(tc.want)
		for i := 0; ok && i < len(got); i++ {
			w := tc.want[i]
			ok = got[i].Start.Equal(hm(w.from)) && got[i].End.Equal(hm(w.to)) && got[i].Action == w.action && got[i].AllowDeviation == w.allow
		}
		if !ok {
			t.Errorf("%s: got%s\nwant %v", tc.name, show(got), tc.want)
		}
		if v := bs.Value(got, tc.in.Prices); v != tc.value {
			t.Errorf("%s: value %d, want %d", tc.name, v, tc.value)
		}
	}
}

func TestPairs(t *testing.T) {
	for _, tc := range []struct {
		capacityWh, powerW int64
		k                  int
	}{
		{5000, 5000, 2},  // 5 kWh / 2.5 kWh
		{13500, 7000, 4}, // 13.5 / 3.5 = 3.86 → 4
		{5000, 3333, 4},  // 10000 / 3333 = 3.0003 → 4
		{5000, 3334, 3},  // 10000 / 3334 = 2.9994 → 3
		{1, 3, 1},        // any capacity at all holds one pair
		{10000, 3, 6667}, // odd watts: 20000 / 3 = 6666.67 → 6667
		{2500, 5000, 1},  // exactly one half-hour
		{0, 5000, 0},     // no capacity
		{5000, 0, 0},     // no power
		{-5000, 5000, 0}, // nonsense
		{5000, -1, 0},    // nonsense
	} {
		if got := bs.Pairs(tc.capacityWh, tc.powerW); got != tc.k {
			t.Errorf("Pairs(%d Wh, %d W) = %d, want %d", tc.capacityWh, tc.powerW, got, tc.k)
		}
	}
}

// naive is the greedy rule computed literally: for each of k rounds, every pair (c, d), c
// before d, of unassigned priced half-hours; the greatest 0.9 × p[d] − p[c], ties to the
// earliest c then the earliest d (strictly greater replaces); stop when it is ≤ 0. It answers
// each half-hour's action and whether it may deviate.
func naive(in bs.Input) ([]bs.Action, []bool) {
	var starts []time.Time
	for t := in.From; t.Before(in.To); t = t.Add(hh) {
		starts = append(starts, t)
	}
	price := map[int64]prices.Centi{}
	for _, p := range in.Prices {
		price[p.Start.Unix()] = p.Centi
	}
	actions := make([]bs.Action, len(starts))
	allow := make([]bool, len(starts))
	assigned := make([]bool, len(starts))
	for i, s := range starts {
		actions[i], allow[i] = bs.AvoidExport, true
		var up, down bool
		for _, d := range in.Dispatches {
			if d.Start.Before(s.Add(hh)) && s.Before(d.End) {
				if d.TurnUp {
					up = true
				} else {
					down = true
				}
			}
		}
		switch {
		case down:
			actions[i], allow[i], assigned[i] = bs.DischargeMax, false, true
		case up:
			actions[i], allow[i], assigned[i] = bs.ChargeMax, false, true
		}
	}
	free := func(i int) bool {
		_, ok := price[starts[i].Unix()]
		return ok && !assigned[i]
	}
	for range bs.Pairs(in.CapacityWh, in.PowerW) {
		bc, bd, found := -1, -1, false
		var best int64
		for c := range starts {
			for d := c + 1; d < len(starts); d++ {
				if !free(c) || !free(d) {
					continue
				}
				v := 9*int64(price[starts[d].Unix()]) - 10*int64(price[starts[c].Unix()])
				if !found || v > best {
					bc, bd, best, found = c, d, v, true
				}
			}
		}
		if !found || best <= 0 {
			break
		}
		actions[bc], actions[bd] = bs.ChargeMax, bs.DischargeMax
		assigned[bc], assigned[bd] = true, true
	}
	return actions, allow
}

// halfHours checks the steps cover the horizon's half-hours exactly once, in order, equal
// neighbours merged, and answers each half-hour's action and whether it may deviate.
func halfHours(t *testing.T, c int, got []bs.Step, in bs.Input) ([]bs.Action, []bool) {
	t.Helper()
	var actions []bs.Action
	var allow []bool
	next := in.From
	for i, s := range got {
		if !s.Start.Equal(next) || !s.End.After(s.Start) || s.End.Sub(s.Start)%hh != 0 {
			t.Fatalf("case %d: step %d does not follow on:%s", c, i, show(got))
		}
		if i > 0 && got[i-1].Action == s.Action && got[i-1].AllowDeviation == s.AllowDeviation {
			t.Fatalf("case %d: equal neighbours not merged:%s", c, show(got))
		}
		for t0 := s.Start; t0.Before(s.End); t0 = t0.Add(hh) {
			actions, allow = append(actions, s.Action), append(allow, s.AllowDeviation)
		}
		next = s.End
	}
	if !next.Equal(in.To) {
		t.Fatalf("case %d: the steps end at %s, the horizon at %s", c, next, in.To)
	}
	return actions, allow
}

// valueOf is the value of half-hours' actions, as Value counts it: −10 × price for a charge,
// 9 × price for a discharge, those that may deviate only.
func valueOf(actions []bs.Action, allow []bool, in bs.Input) int64 {
	price := map[int64]prices.Centi{}
	for _, p := range in.Prices {
		price[p.Start.Unix()] = p.Centi
	}
	var v int64
	for i := range actions {
		p := int64(price[in.From.Add(time.Duration(i)*hh).Unix()])
		if allow[i] && actions[i] == bs.ChargeMax {
			v -= 10 * p
		}
		if allow[i] && actions[i] == bs.DischargeMax {
			v += 9 * p
		}
	}
	return v
}

// Random small horizons: the schedule covers every half-hour exactly once, never holds more
// than k half-hours of charge nor discharges below empty, matches the naive greedy rule half-
// hour by half-hour, and so has its value.
func TestPlanAgainstNaiveGreedy(t *testing.T) {
	rng := rand.New(rand.NewPCG(36, 7))
	nonTrivial := 0
	for c := 0; c < 3000; c++ {
		n := 1 + rng.IntN(12)
		if c%100 == 0 { // now and then a horizon of two days and more, past the slots kept on the stack
			n = 90 + rng.IntN(110)
		}
		from := midnight.Add(time.Duration(rng.IntN(48)) * hh)
		in := bs.Input{From: from, To: from.Add(time.Duration(n) * hh),
			CapacityWh: int64(rng.IntN(12000)), PowerW: int64(rng.IntN(8000))}
		for i := -1; i <= n; i++ { // some prices outside the horizon too
			if rng.IntN(5) > 0 {
				in.Prices = append(in.Prices, prices.Price{Start: from.Add(time.Duration(i) * hh),
					Centi: prices.Centi((rng.IntN(9) - 2) * 1000)})
			}
		}
		for range rng.IntN(3) {
			s := from.Add(time.Duration(rng.IntN(n*30)) * time.Minute)
			in.Dispatches = append(in.Dispatches, bs.Dispatch{Start: s, End: s.Add(time.Duration(1+rng.IntN(60)) * time.Minute), TurnUp: rng.IntN(2) == 0})
		}
		k := bs.Pairs(in.CapacityWh, in.PowerW)
		got := bs.Plan(in)
		wantActions, wantAllow := naive(in)

		// (c) every half-hour covered exactly once, in order; equal neighbours merged.
		actions, allow := halfHours(t, c, got, in)
		// (a) charge held, in half-hours, within [0, k] at every step.
		held := 0
		for i := range actions {
			if !allow[i] {
				continue
			}
			switch actions[i] {
			case bs.ChargeMax:
				held++
			case bs.DischargeMax:
				held--
			}
			if held < 0 || held > k {
				t.Fatalf("case %d: holds %d half-hours of charge (k = %d) at %d:%s", c, held, k, i, show(got))
			}
		}
		// (b) the naive rule's schedule, and so its value.
		for i := range actions {
			if actions[i] != wantActions[i] || allow[i] != wantAllow[i] {
				t.Fatalf("case %d: half-hour %d is %s/%v, the naive rule says %s/%v:%s", c, i, actions[i], allow[i],
					wantActions[i], wantAllow[i], show(got))
			}
		}
		naiveValue := valueOf(wantActions, wantAllow, in)
		if v := bs.Value(got, in.Prices); v != naiveValue {
			t.Fatalf("case %d: value %d, the naive rule's %d", c, v, naiveValue)
		}
		if naiveValue > 0 {
			nonTrivial++
		}
	}
	if nonTrivial < 500 {
		t.Errorf("only %d cases with a profitable pair: the generator is too narrow", nonTrivial)
	}
}

// A dispatch fixes every half-hour it overlaps, to the nanosecond: one that ends a nanosecond
// into a half-hour, or starts a nanosecond before one ends, fixes it; one that ends as it
// starts, or starts as it ends, does not. Before the horizon, after it and across its ends too.
func TestPlanDispatchEdgesToTheNanosecond(t *testing.T) {
	from := midnight.Add(4 * hh)
	in := bs.Input{From: from, To: from.Add(6 * hh), Prices: priced(0, 0, 0, 0, 10, 50, 20, 80, 30, 90), CapacityWh: 13500, PowerW: 5000}
	ns := time.Nanosecond
	for c, ds := range [][]bs.Dispatch{
		{{Start: from.Add(hh - ns), End: from.Add(hh + ns)}},                                                                   // two half-hours, a nanosecond of each
		{{Start: from.Add(hh), End: from.Add(2 * hh), TurnUp: true}},                                                           // one exactly
		{{Start: from.Add(-hh), End: from.Add(ns)}},                                                                            // from before the horizon, into its first
		{{Start: from.Add(-hh), End: from}},                                                                                    // ends as the horizon starts
		{{Start: from.Add(6*hh - ns), End: from.Add(9 * hh), TurnUp: true}},                                                    // into the last from a nanosecond before its end
		{{Start: from.Add(6 * hh), End: from.Add(7 * hh)}},                                                                     // starts as the horizon ends
		{{Start: from.Add(2*hh + ns), End: from.Add(2*hh + 2*ns)}},                                                             // inside one half-hour
		{{Start: from.Add(-3 * hh), End: from.Add(9 * hh), TurnUp: true}},                                                      // over the whole horizon
		{{Start: from.Add(hh + ns), End: from.Add(3*hh - ns)}, {Start: from.Add(2 * hh), End: from.Add(4 * hh), TurnUp: true}}, // both: down wins
	} {
		in.Dispatches = ds
		got := bs.Plan(in)
		want, wantAllow := naive(in)
		actions, allow := halfHours(t, c, got, in)
		for i := range actions {
			if actions[i] != want[i] || allow[i] != wantAllow[i] {
				t.Fatalf("case %d: half-hour %d is %s/%v, the naive rule says %s/%v:%s", c, i, actions[i], allow[i], want[i], wantAllow[i], show(got))
			}
		}
	}
}

// A plan allocates its steps and nothing else (the battery schedule is a hot read): a two-day
// horizon's half-hours are worked on the stack, its prices placed without a map.
func TestPlanAllocatesOnlyItsSteps(t *testing.T) {
	in := bs.Input{From: midnight, To: midnight.Add(96 * hh), CapacityWh: 13500, PowerW: 5000,
		Dispatches: []bs.Dispatch{{Start: at(17, 0), End: at(18, 0)}, {Start: at(3, 0), End: at(3, 30), TurnUp: true}}}
	for i := range 96 {
		in.Prices = append(in.Prices, prices.Price{Start: midnight.Add(time.Duration(i) * hh), Centi: prices.Centi((i*37)%101*100 - 1000)})
	}
	if steps := bs.Plan(in); len(steps) < 10 {
		t.Fatalf("a plan of %d steps: the input is too plain to tell", len(steps))
	}
	if allocs := testing.AllocsPerRun(100, func() { bs.Plan(in) }); allocs != 1 {
		t.Errorf("a plan allocates %v times, want 1 (its steps)", allocs)
	}
}
