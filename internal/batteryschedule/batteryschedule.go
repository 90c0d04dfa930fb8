// Package batteryschedule is the battery schedule's rule (docs/api.md, "Battery schedule"), pure:
// what GET /entities/asset/{asset_id}/battery-schedule answers for a battery actively enrolled
// in full_asset_schedule_control.
//
// The rule, in the spec's terms:
//
//   - The horizon is the price curve's (internal/prices.Horizon): every half-hour in it gets a
//     step.
//   - A half-hour under a turn-down dispatch of this battery is discharge_max, under a turn-up
//     dispatch charge_max, each with allow_deviation false; the grid's request takes
//     precedence over everything else (a half-hour under both is the turn-down's).
//   - k = ceil(capacity_kwh / (P × 0.5)), P the dispatch power in kW (the custom dispatch power,
//     else the rating: internal/dispatch.PowerW). Without a capacity or a power, k is 0.
//   - Repeat k times: among the unassigned half-hours with a declared price, pick the pair
//     (charge c, discharge d, c before d) that maximises 0.9 × price[d] − price[c] (0.9 is the
//     round-trip efficiency), ties to the earliest c, then the earliest d; stop when that value
//     is ≤ 0; assign charge_max to c and discharge_max to d, with allow_deviation true.
//   - Every other half-hour is avoid_export with allow_deviation true.
//   - Adjacent steps with the same action and allow_deviation are merged.
//
// A pair's energy is one half-hour at P, and a battery that starts a horizon empty never holds
// more than k pairs' charge: the schedule never asks it to discharge below empty (every
// discharge follows its charge) nor to hold more than k half-hours of charge (the tests check
// both, and that the schedule's value equals the greedy rule's computed naively).
package batteryschedule

import (
	"time"

	"github.com/flexsite/flexsite/internal/prices"
)

// HalfHour is the length of a settlement period.
const HalfHour = prices.HalfHour

// Action is a step's action: prod's BatteryScheduleAction.
type Action string

// The actions.
const (
	ChargeMax    Action = "charge_max"
	DischargeMax Action = "discharge_max"
	AvoidExport  Action = "avoid_export"
	AvoidImport  Action = "avoid_import"
)

// Efficiency is the round-trip efficiency the rule assumes, in tenths (0.9).
const efficiencyTenths = 9

// Step is one step of the schedule: prod's BatteryScheduleStep.
type Step struct {
	Start, End     time.Time
	Action         Action
	AllowDeviation bool
}

// Dispatch is a dispatch of this battery that stands: its window and whether it turns the
// battery up (charge) or down (discharge).
type Dispatch struct {
	Start, End time.Time
	TurnUp     bool
}

// Input is everything the rule reads.
type Input struct {
	// From and To are the horizon (half-hour aligned).
	From, To time.Time
	// Prices are the declared prices of the horizon (others are ignored).
	Prices []prices.Price
	// CapacityWh and PowerW are the battery's; 0 when unknown.
	CapacityWh, PowerW int64
	// Dispatches are its dispatches that stand.
	Dispatches []Dispatch
}

// Pairs is k: how many charge–discharge pairs the battery's capacity holds.
func Pairs(capacityWh, powerW int64) int {
	if capacityWh <= 0 || powerW <= 0 {
		return 0
	}
	// ceil(capacity / (P × 0.5 h)) = ceil(2 × capacity / P), exact in integers.
	return int((2*capacityWh + powerW - 1) / powerW)
}

// slot is one half-hour of the horizon (the i-th starts i half-hours after the horizon's
// start): 16 bytes, no pointer, so that a horizon's slots fit on the stack.
type slot struct {
	price    prices.Centi
	action   act
	priced   bool
	fixed    bool // under a dispatch: allow_deviation false
	assigned bool
}

// act is a slot's action, as a byte (actions names it).
type act uint8

const (
	actAvoidExport act = iota
	actChargeMax
	actDischargeMax
)

var actions = [...]Action{actAvoidExport: AvoidExport, actChargeMax: ChargeMax, actDischargeMax: DischargeMax}

// stackSlots is how many slots Plan keeps on the stack: a horizon is at most two UK days
// (internal/prices.Horizon), 100 half-hours with a clock change; a longer one is allocated.
const stackSlots = 128

// Plan applies the rule.
func Plan(in Input) []Step {
	from := in.From.Truncate(HalfHour)
	n := 0
	if in.To.After(from) {
		n = int((in.To.Sub(from) + HalfHour - 1) / HalfHour)
	}
	// A read's only allocation is its steps: the slots live on the stack, the prices are
	// placed by their offset from the horizon's start (whole seconds, as they were matched by
	// their Unix time), and the steps are counted before they are made.
	var buf [stackSlots]slot
	var slots []slot
	if n > len(buf) {
		slots = make([]slot, n)
	} else {
		slots = buf[:n]
	}
	first := from.Unix()
	for _, p := range in.Prices {
		if d := p.Start.Unix() - first; d >= 0 && d%halfHourSeconds == 0 && d/halfHourSeconds < int64(n) {
			slots[d/halfHourSeconds].price, slots[d/halfHourSeconds].priced = p.Centi, true
		}
	}
	if len(in.Dispatches) > 0 {
		t := from
		for i := range slots {
			if up, down := under(t, in.Dispatches); down {
				slots[i].action, slots[i].fixed, slots[i].assigned = actDischargeMax, true, true
			} else if up {
				slots[i].action, slots[i].fixed, slots[i].assigned = actChargeMax, true, true
			}
			t = t.Add(HalfHour)
		}
	}
	for range Pairs(in.CapacityWh, in.PowerW) {
		c, d, ok := bestPair(slots)
		if !ok {
			break
		}
		slots[c].action, slots[c].assigned = actChargeMax, true
		slots[d].action, slots[d].assigned = actDischargeMax, true
	}
	return merge(from.UTC(), slots)
}

// halfHourSeconds is HalfHour in seconds.
const halfHourSeconds = int64(HalfHour / time.Second)

// bestPair is the pair (c, d), c before d, of unassigned priced slots with the greatest value
// 0.9 × price[d] − price[c] (compared ×10, in integers), ties to the earliest c then the
// earliest d; ok is false when no pair's value is > 0. One pass: for each d, the best c before
// it is the cheapest unassigned priced slot so far, the earliest among equals.
func bestPair(slots []slot) (c, d int, ok bool) {
	cheapest := -1
	var best int64
	for j := range slots {
		s := &slots[j]
		if s.assigned || !s.priced {
			continue
		}
		if cheapest >= 0 {
			v := efficiencyTenths*int64(s.price) - 10*int64(slots[cheapest].price)
			if v > 0 && (!ok || v > best || (v == best && cheapest < c)) {
				c, d, best, ok = cheapest, j, v, true
			}
		}
		if cheapest < 0 || s.price < slots[cheapest].price {
			cheapest = j
		}
	}
	return c, d, ok
}

// under tells whether the half-hour from t overlaps a turn-up and a turn-down dispatch.
func under(t time.Time, ds []Dispatch) (up, down bool) {
	end := t.Add(HalfHour)
	for _, d := range ds {
		if d.Start.Before(end) && d.End.After(t) {
			if d.TurnUp {
				up = true
			} else {
				down = true
			}
		}
	}
	return up, down
}

// merge turns the slots, the first starting at from, into steps, adjacent equal ones merged
// (the same action and allow_deviation).
func merge(from time.Time, slots []slot) []Step {
	same := func(a, b *slot) bool { return a.action == b.action && a.fixed == b.fixed }
	n := 0
	for i := range slots {
		if i == 0 || !same(&slots[i-1], &slots[i]) {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	out := make([]Step, 0, n)
	for i := range slots {
		s := &slots[i]
		end := from.Add(time.Duration(i+1) * HalfHour)
		if i > 0 && same(&slots[i-1], s) {
			out[len(out)-1].End = end
			continue
		}
		out = append(out, Step{Start: from.Add(time.Duration(i) * HalfHour), End: end,
			Action: actions[s.action], AllowDeviation: !s.fixed})
	}
	return out
}

// Value is the schedule's value under the rule, in hundredths of £/MWh-half-hours: the sum over
// its assigned (not fixed) half-hours of 0.9 × price for a discharge and −price for a charge,
// ×10 to stay in integers. The tests compare it with the greedy rule computed naively.
func Value(steps []Step, ps []prices.Price) int64 {
	priced := make(map[int64]prices.Centi, len(ps))
	for _, p := range ps {
		priced[p.Start.Unix()] = p.Centi
	}
	var v int64
	for _, s := range steps {
		if !s.AllowDeviation {
			continue
		}
		for t := s.Start; t.Before(s.End); t = t.Add(HalfHour) {
			switch s.Action {
			case ChargeMax:
				v -= 10 * int64(priced[t.Unix()])
			case DischargeMax:
				v += efficiencyTenths * int64(priced[t.Unix()])
			}
		}
	}
	return v
}
