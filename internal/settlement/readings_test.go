package settlement

import (
	"maps"
	"math"
	"strings"
	"testing"
	"time"
)

func TestHalfHourly(t *testing.T) {
	at := func(h, m int) time.Time { return time.Date(2026, time.January, 13, h, m, 0, 0, time.UTC) }
	k := func(h, m int) int64 { return Key(at(h, m)) }
	r := func(h0, m0, h1, m1 int, v float64) Reading {
		return Reading{Start: at(h0, m0), End: at(h1, m1), Value: v}
	}
	reg := func(h, m int, v float64) Reading { return Reading{Start: at(h, m), End: at(h, m), Value: v} }
	fiveMinutes := make([]Reading, 0, 10) // 0.1 kW for 30 minutes in 3-minute samples: 0.05 kWh, not 0.04999…
	for i := range 10 {
		fiveMinutes = append(fiveMinutes, r(17, 3*i, 17, 3*i+3, 0.1))
	}
	for _, c := range []struct {
		name     string
		label    Label
		readings []Reading
		want     Series
	}{
		{"kW over a half-hour", BoundaryImportKW, []Reading{r(17, 0, 17, 30, 2)}, Series{k(17, 0): {1_000_000, 1800}}},
		{"kW samples add up exactly", BoundaryImportKW, fiveMinutes, Series{k(17, 0): {50_000, 1800}}},
		{"kW across a boundary, split pro rata", BoundaryImportKW, []Reading{r(17, 20, 17, 40, 3)}, Series{k(17, 0): {500_000, 600}, k(17, 30): {500_000, 600}}},
		{"export is negative import", BoundaryImportKW, []Reading{r(17, 0, 17, 15, -4)}, Series{k(17, 0): {-1_000_000, 900}}},
		{"discharging is negative import", BatteryInverterImportKW, []Reading{r(17, 0, 17, 30, -1)}, Series{k(17, 0): {-500_000, 1800}}},
		{"solar counts against import", SolarPowerKW, []Reading{r(12, 0, 12, 30, 2)}, Series{k(12, 0): {-1_000_000, 1800}}},
		{"kWh in an interval, split", ChargerConsumptionEnergyKWh, []Reading{r(17, 15, 17, 45, 1.2)}, Series{k(17, 0): {600_000, 900}, k(17, 30): {600_000, 900}}},
		{"provisional consumption", ProvisionalConsumptionKWh, []Reading{r(17, 0, 17, 30, 0.75)}, Series{k(17, 0): {750_000, 1800}}},
		{"import register differenced", BoundaryLifetimeImportEnergyKWh,
			[]Reading{reg(18, 0, 101.5), reg(17, 0, 100), reg(17, 30, 100.5)}, // any order
			Series{k(17, 0): {500_000, 1800}, k(17, 30): {1_000_000, 1800}}},
		{"export register counts negative", BoundaryLifetimeExportEnergyKWh, []Reading{reg(12, 0, 7), reg(12, 30, 8.25)}, Series{k(12, 0): {-1_250_000, 1800}}},
		{"register across a boundary", ChargerLifetimeConsumptionEnergyKWh, []Reading{reg(17, 15, 10), reg(17, 45, 11)}, Series{k(17, 0): {500_000, 900}, k(17, 30): {500_000, 900}}},
		{"register going down is a reset: nothing", BoundaryLifetimeImportEnergyKWh, []Reading{reg(17, 0, 100), reg(17, 30, 3), reg(18, 0, 4)}, Series{k(17, 30): {1_000_000, 1800}}},
		{"register gap above 30 minutes: nothing", BoundaryLifetimeImportEnergyKWh, []Reading{reg(17, 0, 100), reg(18, 0, 101)}, Series{}},
		{"reading longer than 30 minutes: nothing", BoundaryImportKW, []Reading{r(17, 0, 18, 0, 1)}, Series{}},
		{"empty interval: nothing", BoundaryImportKW, []Reading{r(17, 0, 17, 0, 1)}, Series{}},
		{"an overlapping reading is passed over", BoundaryImportKW, []Reading{r(17, 0, 17, 30, 2), r(17, 10, 17, 20, 50)}, Series{k(17, 0): {1_000_000, 1800}}},
		{"no readings", BoundaryImportKW, nil, Series{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := HalfHourly(c.label, c.readings)
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
}

func TestHalfHourlyRefuses(t *testing.T) {
	at := time.Date(2026, time.January, 13, 17, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		label   Label
		reading Reading
		want    string
	}{
		{BatteryStateOfChargePct, Reading{at, at, 50}, "not an energy flow"},
		{BatteryStoredEnergyKWh, Reading{at, at, 5}, "not an energy flow"},
		{"kettle_kw", Reading{at, at, 5}, "not an energy flow"},
		{SolarPowerKW, Reading{at, at.Add(time.Minute), -1}, "must not be negative"},
		{BoundaryLifetimeImportEnergyKWh, Reading{at, at, -1}, "must not be negative"},
		{BoundaryImportKW, Reading{at, at.Add(-time.Minute), 1}, "end is before its start"},
		{BoundaryImportKW, Reading{at, at.Add(time.Minute), math.NaN()}, "finite"},
	} {
		if _, err := HalfHourly(c.label, []Reading{c.reading}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s %+v: %v, want %q", c.label, c.reading, err, c.want)
		}
	}
	if err := CheckReading(BatteryStateOfChargePct, Reading{at, at, 100.5}); err == nil {
		t.Error("a state of charge of 100.5 % is accepted")
	}
	for _, l := range Labels {
		if err := CheckReading(l, Reading{at, at, 0}); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
	if err := CheckReading(BoundaryImportKW, Reading{at, at, -3}); err != nil {
		t.Errorf("an export: %v", err)
	}
}

// A reading may start up to MaxLead after it is received, not later; CheckReadingAt refuses
// what CheckReading refuses too.
func TestCheckReadingAt(t *testing.T) {
	now := time.Date(2026, time.January, 13, 17, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		start time.Time
		ok    bool
	}{
		{now.AddDate(-5, 0, 0), true},
		{now, true},
		{now.Add(MaxLead), true},
		{now.Add(MaxLead + time.Second), false},
	} {
		err := CheckReadingAt(BoundaryImportKW, Reading{c.start, c.start.Add(time.Minute), 1}, now)
		if (err == nil) != c.ok {
			t.Errorf("start %s: %v, want ok=%v", c.start, err, c.ok)
		}
	}
	if err := CheckReadingAt(SolarPowerKW, Reading{now, now, -1}, now); err == nil {
		t.Error("a negative solar reading is accepted")
	}
}

func TestSum(t *testing.T) {
	imp := Series{1: {1_000_000, 1800}, 2: {500_000, 1500}, 3: {10, 1800}}
	exp := Series{1: {-200_000, 1700}, 2: {-100_000, 1800}}
	want := Series{1: {800_000, 1700}, 2: {400_000, 1500}, 3: {10, 0}}
	if got := Sum(imp, exp); !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := Sum(); len(got) != 0 {
		t.Errorf("Sum() = %v", got)
	}
}

// Raw readings through to a credit: a boundary's registers read every half-hour, and the
// worked example 1 again.
func TestReadingsToCredit(t *testing.T) {
	tuesday := Date{2026, time.January, 13}
	var imp []Reading
	total := 1000.0
	read := func(t time.Time) { imp = append(imp, Reading{Start: t, End: t, Value: total}) }
	for back := LookbackDays; back >= 0; back-- {
		d := tuesday.AddDays(-back)
		if d.Weekend() {
			continue
		}
		use := []float64{1.8, 2.6}
		if back == 0 {
			use = []float64{0.4, 2.9}
		}
		t0 := time.Date(d.Year, d.Month, d.Day, 17, 30, 0, 0, London)
		read(t0)
		for i, v := range use {
			total += v
			read(t0.Add(time.Duration(i+1) * 30 * time.Minute))
		}
	}
	s, err := HalfHourly(BoundaryLifetimeImportEnergyKWh, imp)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Settle(Input{Event: Event{Start: at(time.January, 13, 17, 30), End: at(time.January, 13, 18, 30), Direction: TurnDown, RateCentipence: 2500}, Energy: s})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != Settled || got.CreditPence != 35 || got.FlexWh != -1100 {
		t.Errorf("%s: %d p, %d Wh; want settled, 35 p, -1100 Wh", got.Status, got.CreditPence, got.FlexWh)
	}
}
