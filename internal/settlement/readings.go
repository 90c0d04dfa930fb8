package settlement

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
)

// Label is what a reading measures: the production service's ReadingDataPointLabel
// (reference OpenAPI 1.4.6), with its units and sign conventions.
type Label string

// The labels.
const (
	// BoundaryImportKW is power imported from the grid, kW: positive imported, negative exported.
	BoundaryImportKW Label = "boundary_import_kw"
	// BatteryInverterImportKW is power into the battery, kW: positive charging, negative discharging.
	BatteryInverterImportKW Label = "battery_inverter_import_kw"
	// ChargerConsumptionEnergyKWh is the energy a charger consumed in the reading's interval
	// (30 minutes), kWh, ≥ 0.
	ChargerConsumptionEnergyKWh Label = "charger_consumption_energy_kwh"
	// ChargerLifetimeConsumptionEnergyKWh is a charger's lifetime consumption register, kWh, ≥ 0.
	ChargerLifetimeConsumptionEnergyKWh Label = "charger_lifetime_consumption_energy_kwh"
	// BoundaryLifetimeImportEnergyKWh is the boundary's lifetime import register, kWh, ≥ 0,
	// never decreasing.
	BoundaryLifetimeImportEnergyKWh Label = "boundary_lifetime_import_energy_kwh"
	// BoundaryLifetimeExportEnergyKWh is the boundary's lifetime export register, kWh, ≥ 0,
	// never decreasing.
	BoundaryLifetimeExportEnergyKWh Label = "boundary_lifetime_export_energy_kwh"
	// ProvisionalConsumptionKWh is provisional consumption in the reading's interval, kWh, ≥ 0.
	ProvisionalConsumptionKWh Label = "provisional_consumption_kwh"
	// SolarPowerKW is solar generation, kW, ≥ 0.
	SolarPowerKW Label = "solar_power_kw"
	// BatteryStateOfChargePct is a battery's state of charge, %, 0 to 100: not an energy flow.
	BatteryStateOfChargePct Label = "battery_state_of_charge_pct"
	// BatteryStoredEnergyKWh is the energy stored in a battery, kWh, ≥ 0: not an energy flow.
	BatteryStoredEnergyKWh Label = "battery_stored_energy_kwh"
)

// Labels lists every label, in the reference's order.
var Labels = []Label{BoundaryImportKW, BatteryInverterImportKW, ChargerConsumptionEnergyKWh,
	ChargerLifetimeConsumptionEnergyKWh, BoundaryLifetimeImportEnergyKWh, BoundaryLifetimeExportEnergyKWh,
	ProvisionalConsumptionKWh, SolarPowerKW, BatteryStateOfChargePct, BatteryStoredEnergyKWh}

// How a label's values become energy.
type measure int

const (
	power    measure = iota + 1 // kW over the reading's interval
	interval                    // kWh in the reading's interval
	register                    // a lifetime kWh register: differenced
	state                       // not an energy flow
)

// labelRule is a label's measure, the sign of its energy as seen from the grid (+1: more
// import at the site's boundary), whether its values may be negative, and whether it
// measures the whole home (the boundary: appliances that are no asset count too) rather than
// one of its assets.
type labelRule struct {
	measure   measure
	toImport  int
	negative  bool
	wholeHome bool
}

var labelRules = map[Label]labelRule{
	BoundaryImportKW:                    {power, +1, true, true},
	BatteryInverterImportKW:             {power, +1, true, false},
	ChargerConsumptionEnergyKWh:         {interval, +1, false, false},
	ChargerLifetimeConsumptionEnergyKWh: {register, +1, false, false},
	BoundaryLifetimeImportEnergyKWh:     {register, +1, false, true},
	BoundaryLifetimeExportEnergyKWh:     {register, -1, false, true},
	ProvisionalConsumptionKWh:           {interval, +1, false, true},
	SolarPowerKW:                        {power, -1, false, false},
	BatteryStateOfChargePct:             {state, 0, false, false},
	BatteryStoredEnergyKWh:              {state, 0, false, false},
}

// The bounds on a site's power: what its readings may say and its credits pay for.
const (
	// SupplyLimitW is the most a UK domestic supply carries, in W: 100 A single-phase at
	// 230 V, 23 kW. No home imports or exports more, whatever its assets.
	SupplyLimitW = 23_000
	// RatedPowerMarginPercent is how far above the sum of its assets' power ratings a site's
	// assets are taken to run (150 %: a rating is nominal, an inverter's or a charger's
	// measured power can pass it).
	RatedPowerMarginPercent = 150
)

// PlausiblePowerW is the most a site's assets may plausibly import or export, in W, when
// their power ratings (Asset spec.powerW) add up to ratedW: ratedW × RatedPowerMarginPercent,
// never above SupplyLimitW; SupplyLimitW for a site with no rated asset.
func PlausiblePowerW(ratedW int64) int64 {
	if ratedW <= 0 || ratedW >= SupplyLimitW {
		return SupplyLimitW
	}
	return min(SupplyLimitW, ratedW*RatedPowerMarginPercent/100)
}

// CheckReadingPower refuses a reading whose power (an energy reading: its average power
// over its interval) is above what it can plausibly be: plausibleW (PlausiblePowerW of the
// site) for a reading of one of the site's assets, SupplyLimitW for the boundary's (the whole
// home: appliances that are no asset count too). A lifetime register's single value says
// nothing of power: HalfHourly bounds the span between two of them instead. Readings are
// judged one by one (CheckReading first), each refused with its reason.
func CheckReadingPower(label Label, r Reading, plausibleW int64) error {
	rule, ok := labelRules[label]
	if !ok {
		return nil
	}
	bound := plausibleW
	if rule.wholeHome || bound <= 0 || bound > SupplyLimitW {
		bound = SupplyLimitW
	}
	var kw float64
	switch rule.measure {
	case power:
		kw = math.Abs(r.Value)
	case interval:
		hours := r.End.Sub(r.Start).Hours()
		if hours <= 0 {
			return nil // an empty interval counts for nothing (HalfHourly)
		}
		kw = math.Abs(r.Value) / hours
	default:
		return nil
	}
	if kw*1000 <= float64(bound) {
		return nil
	}
	if rule.wholeHome || bound == SupplyLimitW {
		return fmt.Errorf("%s: %s kW is above the %s kW a UK domestic supply (100 A at 230 V) carries",
			label, kwText(kw), kwText(float64(SupplyLimitW)/1000))
	}
	return fmt.Errorf("%s: %s kW is above the site's plausible %s kW (its assets' power ratings + 50 %%)",
		label, kwText(kw), kwText(float64(bound)/1000))
}

func kwText(kw float64) string { return strconv.FormatFloat(kw, 'g', 6, 64) }

// MaxInterval is the longest span one reading (or two successive register readings) may
// cover and still count: spreading energy over a longer span would claim coverage the
// readings do not have.
const MaxInterval = 30 * time.Minute

// Reading is one data point of one asset and label.
type Reading struct {
	// Start and End bound the reading's interval. A register's value is read at End.
	Start, End time.Time
	Value      float64
}

// CheckReading reports what is wrong with a reading of a label, or nil: an unknown label, an
// end before its start, a value that is not a finite number, a wrong sign for the label, a
// state of charge outside 0–100.
func CheckReading(label Label, r Reading) error {
	rule, ok := labelRules[label]
	switch {
	case !ok:
		return fmt.Errorf("unknown label %q", label)
	case r.End.Before(r.Start):
		return errors.New("the reading's end is before its start")
	case math.IsNaN(r.Value) || math.IsInf(r.Value, 0):
		return errors.New("the value is not a finite number")
	case !rule.negative && r.Value < 0:
		return fmt.Errorf("%s must not be negative", label)
	case label == BatteryStateOfChargePct && r.Value > 100:
		return fmt.Errorf("%s must be between 0 and 100", label)
	}
	return nil
}

// MaxLead is how far ahead of the time it is received a reading may start: readings measure
// what happened, and a start further ahead is a wrong clock or a wrong unit.
const MaxLead = 31 * 24 * time.Hour

// MaxAge is how far before the time it is received a reading may start: three years, the
// span for which readings have monthly partitions (internal/app/readings.PartitionsBack, 36
// months, never shorter than this), so that an old reading is refused with its reason rather
// than stored in the default partition, unpruned, where it would block that month's partition
// later. It does not bound money: no event settles readings older than its LookbackDays, and an
// event starts at most validation.MaxFlexBackdate before it is declared.
const MaxAge = 3 * 365 * 24 * time.Hour

// CheckReadingAt is CheckReading for a reading received at now: it also refuses one that
// starts more than MaxLead after now, or more than MaxAge before it.
func CheckReadingAt(label Label, r Reading, now time.Time) error {
	if err := CheckReading(label, r); err != nil {
		return err
	}
	if r.Start.After(now.Add(MaxLead)) {
		return errors.New("the reading starts more than 31 days in the future")
	}
	if r.Start.Before(now.Add(-MaxAge)) {
		return errors.New("the reading starts more than 3 years ago: older readings are not kept")
	}
	return nil
}

// HalfHourly turns one asset's readings of one label into half-hourly energy, signed as seen
// from the grid (positive: more import at the site's boundary; solar generation and the
// export register count negative), with how much of each half-hour the readings cover:
//   - kW (power) readings: the value held over the reading's interval, integrated;
//   - kWh readings of an interval: the value;
//   - lifetime registers: the difference between successive readings (read at their End),
//     over the span between them; a register that goes down (a reset or a replaced meter),
//     or goes up faster than a domestic supply carries (SupplyLimitW), gives nothing for
//     that span.
//
// A reading or span that crosses a half-hour boundary is split pro rata of time. Readings or
// spans longer than MaxInterval, empty intervals, and readings overlapping an earlier one
// (by start) count for nothing. Energy is summed in kWh and rounded to the mWh per
// half-hour. States (state of charge, stored energy) are not energy flows: an error, as is
// any reading CheckReading refuses.
func HalfHourly(label Label, readings []Reading) (Series, error) {
	rule, ok := labelRules[label]
	if !ok || rule.measure == state {
		return nil, fmt.Errorf("%q is not an energy flow", label)
	}
	for _, r := range readings {
		if err := CheckReading(label, r); err != nil {
			return nil, err
		}
	}
	rs := slices.Clone(readings)
	acc := accumulator{kwh: map[int64]float64{}, covered: map[int64]time.Duration{}}
	if rule.measure == register {
		slices.SortStableFunc(rs, func(a, b Reading) int { return a.End.Compare(b.End) })
		for i := 1; i < len(rs); i++ {
			prev, cur := rs[i-1], rs[i]
			if !cur.End.After(prev.End) || cur.Value < prev.Value ||
				(cur.Value-prev.Value)*1000 > SupplyLimitW*cur.End.Sub(prev.End).Hours() {
				continue
			}
			acc.spread(prev.End, cur.End, cur.Value-prev.Value)
		}
	} else {
		slices.SortStableFunc(rs, func(a, b Reading) int { return a.Start.Compare(b.Start) })
		var last time.Time
		for _, r := range rs {
			if !r.End.After(r.Start) || r.Start.Before(last) {
				continue
			}
			last = r.End
			kwh := r.Value
			if rule.measure == power {
				kwh *= r.End.Sub(r.Start).Hours()
			}
			acc.spread(r.Start, r.End, kwh)
		}
	}
	out := make(Series, len(acc.kwh))
	for k, v := range acc.kwh {
		out[k] = Energy{
			MilliWh:        int64(math.Round(v * 1e6 * float64(rule.toImport))),
			CoveredSeconds: int32(min(acc.covered[k], HalfHourSeconds*time.Second).Round(time.Second) / time.Second),
		}
	}
	return out, nil
}

type accumulator struct {
	kwh     map[int64]float64
	covered map[int64]time.Duration
}

// spread adds kwh over [from, to) to the half-hours it overlaps, pro rata of time, unless the
// span is longer than MaxInterval.
func (a accumulator) spread(from, to time.Time, kwh float64) {
	span := to.Sub(from)
	if span > MaxInterval {
		return
	}
	for h := from.Truncate(HalfHourSeconds * time.Second); h.Before(to); h = h.Add(HalfHourSeconds * time.Second) {
		end := h.Add(HalfHourSeconds * time.Second)
		lo, hi := h, end
		if from.After(lo) {
			lo = from
		}
		if to.Before(hi) {
			hi = to
		}
		overlap := hi.Sub(lo)
		a.kwh[Key(h)] += kwh * float64(overlap) / float64(span)
		a.covered[Key(h)] += overlap
	}
}

// Sum adds half-hourly series (a site's assets, or a boundary's import and export
// registers): each half-hour's energy is the sum, its coverage the least of theirs (a
// half-hour absent from one series is not covered at all).
func Sum(series ...Series) Series {
	out := Series{}
	for _, s := range series {
		for k, v := range s {
			e := out[k]
			e.MilliWh += v.MilliWh
			out[k] = e
		}
	}
	for k, e := range out {
		e.CoveredSeconds = HalfHourSeconds
		for _, s := range series {
			e.CoveredSeconds = min(e.CoveredSeconds, s[k].CoveredSeconds)
		}
		out[k] = e
	}
	return out
}
