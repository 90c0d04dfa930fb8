package household_test

import (
	"testing"
	"time"

	"github.com/flexsite/flexsite/internal/batteryschedule"
	"github.com/flexsite/flexsite/internal/household"
)

func TestBatteryPlanWords(t *testing.T) {
	// 28 November 2026 is winter: UK local time is UTC.
	at := func(hh, mm int) time.Time { return time.Date(2026, 11, 28, hh, mm, 0, 0, time.UTC) }
	// 1 July 2026 is summer: UK local time is UTC+1.
	summer := func(hh, mm int) time.Time { return time.Date(2026, 7, 1, hh, mm, 0, 0, time.UTC) }
	step := func(from, to time.Time, a batteryschedule.Action, dev bool) batteryschedule.Step {
		return batteryschedule.Step{Start: from, End: to, Action: a, AllowDeviation: dev}
	}
	const c, d, hold = batteryschedule.ChargeMax, batteryschedule.DischargeMax, batteryschedule.AvoidExport
	for _, tc := range []struct {
		name  string
		steps []batteryschedule.Step
		want  string
	}{
		{"a charge and a discharge", []batteryschedule.Step{step(at(0, 0), at(1, 0), hold, true), step(at(1, 0), at(3, 0), c, true),
			step(at(3, 0), at(17, 0), hold, true), step(at(17, 0), at(19, 0), d, true)},
			"Your battery will charge 01:00–03:00, when energy is cheapest, and power your home 17:00–19:00, when energy is dearest"},
		{"UK summer time", []batteryschedule.Step{step(summer(0, 0), summer(1, 0), c, true), step(summer(16, 0), summer(16, 30), d, true)},
			"Your battery will charge 01:00–02:00, when energy is cheapest, and power your home 17:00–17:30, when energy is dearest"},
		{"several windows", []batteryschedule.Step{step(at(1, 0), at(2, 0), c, true), step(at(2, 0), at(3, 0), hold, true),
			step(at(3, 0), at(3, 30), c, true), step(at(4, 0), at(4, 30), c, true), step(at(17, 0), at(18, 0), d, true),
			step(at(19, 0), at(19, 30), d, true)},
			"Your battery will charge 01:00–02:00, 03:00–03:30 and 04:00–04:30, when energy is cheapest, and power your home 17:00–18:00 and 19:00–19:30, when energy is dearest"},
		{"a grid's turn-up alone", []batteryschedule.Step{step(at(10, 0), at(11, 0), c, false)},
			"Your battery will charge 10:00–11:00"},
		{"a grid's turn-down beside a chosen pair", []batteryschedule.Step{step(at(1, 0), at(1, 30), c, true),
			step(at(10, 0), at(11, 0), d, false), step(at(17, 0), at(17, 30), d, true)},
			"Your battery will charge 01:00–01:30, when energy is cheapest, and power your home 10:00–11:00 and 17:00–17:30, when energy is dearest"},
		{"a grid's turn-down alone", []batteryschedule.Step{step(at(10, 0), at(11, 0), d, false)},
			"Your battery will power your home 10:00–11:00"},
		{"nothing to do", []batteryschedule.Step{step(at(0, 0), at(23, 0), hold, true)},
			"Your battery will keep its charge for your home: no cheaper time to charge is planned yet"},
		{"no steps", nil, "Your battery will keep its charge for your home: no cheaper time to charge is planned yet"},
	} {
		if got := household.BatteryPlanWords(tc.steps); got != tc.want {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestBatteryActionWords(t *testing.T) {
	for _, tc := range []struct {
		a    batteryschedule.Action
		dev  bool
		want string
	}{
		{batteryschedule.ChargeMax, true, "Charge"},
		{batteryschedule.DischargeMax, true, "Power your home"},
		{batteryschedule.DischargeMax, false, "Power your home (asked by the grid)"},
		{batteryschedule.AvoidExport, true, "Keep charge for your home"},
		{batteryschedule.AvoidImport, true, "Use no grid energy"},
	} {
		if got := household.BatteryActionWords(tc.a, tc.dev); got != tc.want {
			t.Errorf("%s %v: got %q, want %q", tc.a, tc.dev, got, tc.want)
		}
	}
}
