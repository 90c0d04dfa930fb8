// Package evschedule is the EV schedule's rule (docs/api.md, "The EV schedule"), pure: what
// POST /entities/asset/{asset_id}/event/plug-in-schedule answers a charger or EV that sends the
// charging schedule it means to follow.
//
// The rule, in the spec's terms:
//
//   - n is the request's total duration (the sum of its blocks' lengths) in half-hours, rounded
//     up.
//   - The window runs from the first block's start, rounded down to a half-hour, to the
//     deadline: the latest intent's ready_by_local_time next after that start, else the last
//     block's end. The wall time is read in the latest tariff's timezone, else in UK time. The
//     half-hours of the window are those that start at or after its start and end at or before
//     the deadline.
//   - Candidates are the window's half-hours with a declared price, less those under a
//     turn-down dispatch of this asset (a half-hour that overlaps the dispatch's window).
//   - The answer is the n candidates with the lowest price, ties to the earliest, adjacent
//     half-hours merged into one block, in time order.
//   - When the intent's may_charge_peak is false (prod's default, so also without an intent)
//     and a tariff is known, a half-hour wholly
//     inside one of the tariff's off-peak ranges (in its timezone) wins a price tie over one
//     that is not, ahead of time order.
//   - With fewer than n candidates, or an empty request, the request comes back unchanged
//     (Changed is false).
//
// Under this rule the answer is optimal: no other choice of n candidates has a lower total
// price (the tests check this against brute force on small horizons).
package evschedule

import (
	"cmp"
	"slices"
	"time"

	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
)

// HalfHour is the length of a settlement period.
const HalfHour = prices.HalfHour

// Block is a charging block [Start, End).
type Block struct{ Start, End time.Time }

// Intent is what the schedule reads of the latest intent.
type Intent struct {
	// ReadyBy is ready_by_local_time as a wall time (time since local midnight); nil without
	// an intent (or one without a wall time).
	ReadyBy *time.Duration
	// MayChargePeak is the intent's may_charge_peak.
	MayChargePeak bool
}

// Tariff is what the schedule reads of the latest tariff.
type Tariff struct {
	// OffPeak are its off-peak ranges in minutes of the local day (validation.ParseOffPeakTimes).
	OffPeak []validation.MinuteRange
	// Zone is its timezone.
	Zone *time.Location
}

// Input is everything the rule reads.
type Input struct {
	Requested []Block
	// Prices are the declared prices around the window (others are ignored).
	Prices []prices.Price
	// Intent is the latest intent; nil when none.
	Intent *Intent
	// Tariff is the latest tariff; nil when none.
	Tariff *Tariff
	// TurnDown are the windows of this asset's turn-down dispatches that stand.
	TurnDown []Block
}

// Schedule is the answer.
type Schedule struct {
	Blocks []Block
	// Changed is false when Blocks is the request unchanged.
	Changed bool
	// WindowStart and WindowEnd are the window the half-hours were chosen in (zero for an
	// empty request).
	WindowStart, WindowEnd time.Time
	// Needed is n; Candidates how many candidates the window had.
	Needed, Candidates int
}

// Window is the rule's window for the request: its start (the first block's start rounded down
// to a half-hour) and its deadline. ok is false for an empty request.
func Window(in Input) (start, deadline time.Time, ok bool) {
	if len(in.Requested) == 0 {
		return time.Time{}, time.Time{}, false
	}
	first, last := in.Requested[0].Start, in.Requested[0].End
	for _, b := range in.Requested {
		if b.Start.Before(first) {
			first = b.Start
		}
		if b.End.After(last) {
			last = b.End
		}
	}
	start = first.Truncate(HalfHour)
	deadline = last
	if in.Intent != nil && in.Intent.ReadyBy != nil {
		deadline = nextWallTime(start, *in.Intent.ReadyBy, zoneOf(in.Tariff))
	}
	return start, deadline, true
}

// zoneOf is the wall times' zone: the tariff's, else UK time.
func zoneOf(t *Tariff) *time.Location {
	if t != nil && t.Zone != nil {
		return t.Zone
	}
	return settlement.London
}

// nextWallTime is the first instant strictly after t whose wall time in loc is wall.
func nextWallTime(t time.Time, wall time.Duration, loc *time.Location) time.Time {
	l := t.In(loc)
	h, m, s := int(wall/time.Hour), int(wall%time.Hour/time.Minute), int(wall%time.Minute/time.Second)
	for d := 0; d < 3; d++ {
		c := time.Date(l.Year(), l.Month(), l.Day()+d, h, m, s, 0, loc)
		if c.After(t) {
			return c
		}
	}
	return t.Add(24 * time.Hour) // unreachable: a wall time recurs within two days
}

// Needed is n: the request's total duration in half-hours, rounded up.
func Needed(requested []Block) int {
	var total time.Duration
	for _, b := range requested {
		if b.End.After(b.Start) {
			total += b.End.Sub(b.Start)
		}
	}
	return int((total + HalfHour - 1) / HalfHour)
}

type candidate struct {
	start   time.Time
	price   prices.Centi
	offPeak bool
}

// Plan applies the rule.
func Plan(in Input) Schedule {
	start, deadline, ok := Window(in)
	if !ok {
		return Schedule{Blocks: in.Requested}
	}
	n := Needed(in.Requested)
	out := Schedule{Blocks: in.Requested, WindowStart: start, WindowEnd: deadline, Needed: n}
	priced := make(map[int64]prices.Centi, len(in.Prices))
	for _, p := range in.Prices {
		priced[p.Start.Unix()] = p.Centi
	}
	preferOffPeak := in.Tariff != nil && (in.Intent == nil || !in.Intent.MayChargePeak)
	var cands []candidate
	for t := start; !t.Add(HalfHour).After(deadline); t = t.Add(HalfHour) {
		c, ok := priced[t.Unix()]
		if !ok || underAny(t, in.TurnDown) {
			continue
		}
		cands = append(cands, candidate{start: t, price: c, offPeak: preferOffPeak && offPeak(t, in.Tariff)})
	}
	out.Candidates = len(cands)
	if n == 0 || len(cands) < n {
		return out
	}
	slices.SortFunc(cands, func(a, b candidate) int {
		if c := cmp.Compare(a.price, b.price); c != 0 {
			return c
		}
		if a.offPeak != b.offPeak {
			if a.offPeak {
				return -1
			}
			return 1
		}
		return a.start.Compare(b.start)
	})
	chosen := cands[:n]
	slices.SortFunc(chosen, func(a, b candidate) int { return a.start.Compare(b.start) })
	out.Blocks, out.Changed = merge(chosen), true
	return out
}

// underAny tells whether the half-hour from t overlaps any of the windows.
func underAny(t time.Time, windows []Block) bool {
	end := t.Add(HalfHour)
	for _, w := range windows {
		if w.Start.Before(end) && w.End.After(t) {
			return true
		}
	}
	return false
}

// offPeak tells whether the half-hour from t lies wholly inside one of the tariff's off-peak
// ranges, in its zone. A half-hour that crosses local midnight is off-peak when both of its
// parts are.
func offPeak(t time.Time, tariff *Tariff) bool {
	l := t.In(zoneOf(tariff))
	from := l.Hour()*60 + l.Minute()
	to := from + 30
	if to <= 24*60 {
		return inRange(from, to, tariff.OffPeak)
	}
	return inRange(from, 24*60, tariff.OffPeak) && inRange(0, to-24*60, tariff.OffPeak)
}

func inRange(from, to int, ranges []validation.MinuteRange) bool {
	for _, r := range ranges {
		if r.Start <= from && to <= r.End {
			return true
		}
	}
	return false
}

// merge turns chosen half-hours, in time order, into blocks, adjacent ones merged.
func merge(chosen []candidate) []Block {
	var out []Block
	for _, c := range chosen {
		end := c.start.Add(HalfHour)
		if k := len(out) - 1; k >= 0 && out[k].End.Equal(c.start) {
			out[k].End = end
			continue
		}
		out = append(out, Block{Start: c.start, End: end})
	}
	return out
}
