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
		{now.AddDate(-5, 0, 0), false},
		{now.Add(-MaxAge - time.Second), false},
		{now.Add(-MaxAge), true},
		{now.AddDate(0, -7, 0), true},
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

func TestPlausiblePowerW(t *testing.T) {
	for _, c := range []struct{ rated, want int64 }{
		{0, SupplyLimitW},      // no rated asset: the supply bounds the site
		{-5, SupplyLimitW},     // never: the CRD's minimum is 0
		{7400, 11_100},         // a 7.4 kW charger + 50 %
		{12_400, 18_600},       // and a 5 kW battery
		{15_334, SupplyLimitW}, // + 50 % passes 23 kW
		{1_000_000_000, SupplyLimitW},
		{math.MaxInt64, SupplyLimitW},
	} {
		if got := PlausiblePowerW(c.rated); got != c.want {
			t.Errorf("PlausiblePowerW(%d) = %d, want %d", c.rated, got, c.want)
		}
	}
}

func TestCheckReadingPower(t *testing.T) {
	t0 := time.Date(2026, time.January, 13, 17, 0, 0, 0, time.UTC)
	half := Reading{Start: t0, End: t0.Add(30 * time.Minute)}
	with := func(r Reading, v float64) Reading { r.Value = v; return r }
	for _, c := range []struct {
		label     Label
		r         Reading
		plausible int64
		want      string
	}{
		{BoundaryImportKW, with(half, 1e6), 11_100, "boundary_import_kw: 1e+06 kW is above the 23 kW a UK domestic supply (100 A at 230 V) carries"},
		{BoundaryImportKW, with(half, -23.5), 11_100, "boundary_import_kw: 23.5 kW is above the 23 kW a UK domestic supply (100 A at 230 V) carries"},
		{BoundaryImportKW, with(half, 20), 11_100, ""}, // the whole home: appliances that are no asset
		{BoundaryImportKW, with(half, -23), 11_100, ""},
		{BatteryInverterImportKW, with(half, 1e6), 11_100, "battery_inverter_import_kw: 1e+06 kW is above the site's plausible 11.1 kW (its assets' power ratings + 50 %)"},
		{BatteryInverterImportKW, with(half, -11.1), 11_100, ""},
		{BatteryInverterImportKW, with(half, -11.2), 11_100, "battery_inverter_import_kw: 11.2 kW is above the site's plausible 11.1 kW (its assets' power ratings + 50 %)"},
		{SolarPowerKW, with(half, 24), SupplyLimitW, "solar_power_kw: 24 kW is above the 23 kW a UK domestic supply (100 A at 230 V) carries"},
		{SolarPowerKW, with(half, 24), 0, "solar_power_kw: 24 kW is above the 23 kW a UK domestic supply (100 A at 230 V) carries"},
		{ChargerConsumptionEnergyKWh, with(half, 5.55), 11_100, ""}, // 11.1 kW over 30 minutes
		{ChargerConsumptionEnergyKWh, with(half, 5.6), 11_100, "charger_consumption_energy_kwh: 11.2 kW is above the site's plausible 11.1 kW (its assets' power ratings + 50 %)"},
		{ChargerConsumptionEnergyKWh, with(Reading{Start: t0, End: t0.Add(2 * time.Hour)}, 22), 11_100, ""},
		{ChargerConsumptionEnergyKWh, with(Reading{Start: t0, End: t0}, 5), 11_100, ""}, // empty: counts for nothing
		{ProvisionalConsumptionKWh, with(half, 11), 11_100, ""},                         // the whole home: 22 kW
		{ProvisionalConsumptionKWh, with(half, 12), 11_100, "provisional_consumption_kwh: 24 kW is above the 23 kW a UK domestic supply (100 A at 230 V) carries"},
		{BoundaryLifetimeImportEnergyKWh, with(half, 1e9), 11_100, ""}, // a register: HalfHourly bounds its spans
		{BatteryStoredEnergyKWh, with(half, 1e6), 11_100, ""},          // not an energy flow
	} {
		got := ""
		if err := CheckReadingPower(c.label, c.r, c.plausible); err != nil {
			got = err.Error()
		}
		if got != c.want {
			t.Errorf("CheckReadingPower(%s, %v, %d) = %q, want %q", c.label, c.r.Value, c.plausible, got, c.want)
		}
	}
}

// A register that goes up faster than a domestic supply carries counts for nothing over that
// span (its single values say nothing of power: CheckReadingPower passes them).
func TestHalfHourlyRegisterBound(t *testing.T) {
	t0 := time.Date(2026, time.January, 13, 17, 0, 0, 0, time.UTC)
	reg := func(min int, v float64) Reading {
		return Reading{Start: t0.Add(time.Duration(min) * time.Minute), End: t0.Add(time.Duration(min) * time.Minute), Value: v}
	}
	got, err := HalfHourly(BoundaryLifetimeImportEnergyKWh, []Reading{reg(0, 100), reg(30, 111.5), reg(60, 1e6)})
	if err != nil {
		t.Fatal(err)
	}
	if e := got[Key(t0)]; e.MilliWh != 11_500_000 || e.CoveredSeconds != HalfHourSeconds {
		t.Errorf("23 kW for half an hour: %+v", e)
	}
	if e, ok := got[Key(t0.Add(30*time.Minute))]; ok {
		t.Errorf("a register jumping 1e6 kWh in half an hour counted: %+v", e)
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
