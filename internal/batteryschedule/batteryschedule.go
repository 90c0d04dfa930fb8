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

// slot is one half-hour of the horizon.
type slot struct {
	start    time.Time
	price    prices.Centi
	priced   bool
	action   Action
	fixed    bool // under a dispatch: allow_deviation false
	assigned bool
}

// Plan applies the rule.
func Plan(in Input) []Step {
	from := in.From.Truncate(HalfHour)
	// Sized for the horizon at once: grown by append, the slots were most of a read's garbage.
	var slots []slot
	if in.To.After(from) {
		slots = make([]slot, 0, int((in.To.Sub(from)+HalfHour-1)/HalfHour))
	}
	priced := make(map[int64]prices.Centi, len(in.Prices))
	for _, p := range in.Prices {
		priced[p.Start.Unix()] = p.Centi
	}
	for t := from; t.Before(in.To); t = t.Add(HalfHour) {
		s := slot{start: t.UTC(), action: AvoidExport}
		s.price, s.priced = priced[t.Unix()]
		if up, down := under(t, in.Dispatches); down {
			s.action, s.fixed, s.assigned = DischargeMax, true, true
		} else if up {
			s.action, s.fixed, s.assigned = ChargeMax, true, true
		}
		slots = append(slots, s)
	}
	for range Pairs(in.CapacityWh, in.PowerW) {
		c, d, ok := bestPair(slots)
		if !ok {
			break
		}
		slots[c].action, slots[c].assigned = ChargeMax, true
		slots[d].action, slots[d].assigned = DischargeMax, true
	}
	return merge(slots)
}

// bestPair is the pair (c, d), c before d, of unassigned priced slots with the greatest value
// 0.9 × price[d] − price[c] (compared ×10, in integers), ties to the earliest c then the
// earliest d; ok is false when no pair's value is > 0. One pass: for each d, the best c before
// it is the cheapest unassigned priced slot so far, the earliest among equals.
func bestPair(slots []slot) (c, d int, ok bool) {
	cheapest := -1
	var best int64
	for j := range slots {
		s := slots[j]
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

// merge turns the slots into steps, adjacent equal ones merged.
func merge(slots []slot) []Step {
	var out []Step
	for _, s := range slots {
		end := s.start.Add(HalfHour)
		if k := len(out) - 1; k >= 0 && out[k].End.Equal(s.start) && out[k].Action == s.action &&
			out[k].AllowDeviation == !s.fixed {
			out[k].End = end
			continue
		}
		out = append(out, Step{Start: s.start, End: end, Action: s.action, AllowDeviation: !s.fixed})
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
