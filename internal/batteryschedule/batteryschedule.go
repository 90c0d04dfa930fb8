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

// Step is one step of the schedule: prod's BatteryScheduleStep, which the REST API answers as
// it is (its times in UTC, as Plan makes them).
type Step struct {
	Start          time.Time `json:"start_timestamp"`
	End            time.Time `json:"end_timestamp"`
	Action         Action    `json:"action"`
	AllowDeviation bool      `json:"allow_deviation"`
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
	up, down bool // under a turn-up, a turn-down dispatch (markDispatches)
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

// Plan applies the rule. The steps' times are in UTC.
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
		markDispatches(slots, first, in.Dispatches)
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

// markDispatches fixes the slots under a dispatch (the first starting at first, in Unix
// seconds): discharge_max under a turn-down, else charge_max under a turn-up. A slot i spans
// [first + i·h, first + (i+1)·h), h a half-hour in seconds, and a dispatch overlaps it when it
// starts before the slot's end and ends after its start: in whole seconds, when its start's
// second is before the slot's end and its end rounded up is after the slot's start. Each
// dispatch is placed by arithmetic, not compared with every slot.
func markDispatches(slots []slot, first int64, ds []Dispatch) {
	n := int64(len(slots))
	for _, d := range ds {
		end := d.End.Unix()
		if d.End.Nanosecond() > 0 {
			end++
		}
		lo := max(floorDiv(d.Start.Unix()-first, halfHourSeconds), 0)
		hi := min(ceilDiv(end-first, halfHourSeconds), n)
		for i := lo; i < hi; i++ {
			if d.TurnUp {
				slots[i].up = true
			} else {
				slots[i].down = true
			}
		}
	}
	for i := range slots {
		s := &slots[i]
		if s.down {
			s.action, s.fixed, s.assigned = actDischargeMax, true, true
		} else if s.up {
			s.action, s.fixed, s.assigned = actChargeMax, true, true
		}
	}
}

// floorDiv is a ÷ b rounded down (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// ceilDiv is a ÷ b rounded up (b > 0).
func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }

// merge turns the slots, the first starting at from, into steps, adjacent equal ones merged
// (the same action and allow_deviation): each step's times are computed once, at its ends.
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
	start := from
	for i := 0; i < len(slots); {
		j := i + 1
		for j < len(slots) && same(&slots[i], &slots[j]) {
			j++
		}
		end := from.Add(time.Duration(j) * HalfHour)
		out = append(out, Step{Start: start, End: end, Action: actions[slots[i].action], AllowDeviation: !slots[i].fixed})
		start, i = end, j
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
