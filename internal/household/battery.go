package household

import (
	"strings"
	"time"

	"github.com/flexsite/flexsite/internal/batteryschedule"
)

// BatteryPlanWords tells the household its battery's plan in one sentence, from the schedule's
// steps (internal/batteryschedule): when it will charge and when it will power the home, in UK
// local times, e.g. "Your battery will charge 01:00–03:00, when energy is cheapest, and power
// your home 17:00–19:00". A plan with nothing to do says the battery keeps its charge for the
// home; a charge without a discharge (or the reverse, under a grid's request) says only that.
func BatteryPlanWords(steps []batteryschedule.Step) string {
	var charge, discharge []string
	// A half-hour the grid asked for is not chosen for its price: "cheapest" and "dearest"
	// are said only of a plan that chose some of its half-hours.
	var cheapest, dearest string
	for _, s := range steps {
		switch s.Action {
		case batteryschedule.ChargeMax:
			charge = append(charge, span(s.Start, s.End))
			if s.AllowDeviation {
				cheapest = ", when energy is cheapest"
			}
		case batteryschedule.DischargeMax:
			discharge = append(discharge, span(s.Start, s.End))
			if s.AllowDeviation {
				dearest = ", when energy is dearest"
			}
		}
	}
	switch {
	case len(charge) > 0 && len(discharge) > 0:
		return "Your battery will charge " + list(charge) + cheapest + ", and power your home " + list(discharge) + dearest
	case len(charge) > 0:
		return "Your battery will charge " + list(charge) + cheapest
	case len(discharge) > 0:
		return "Your battery will power your home " + list(discharge) + dearest
	}
	return "Your battery will keep its charge for your home: no cheaper time to charge is planned yet"
}

// span is "01:00–03:00" in UK local time.
func span(from, to time.Time) string { return clock(from) + "–" + clock(to) }

// list joins "a", "a and b", "a, b and c".
func list(xs []string) string {
	if len(xs) == 1 {
		return xs[0]
	}
	return strings.Join(xs[:len(xs)-1], ", ") + " and " + xs[len(xs)-1]
}

// BatteryActionWords names a step's action for the household: the chart's legend and its table.
func BatteryActionWords(a batteryschedule.Action, allowDeviation bool) string {
	var w string
	switch a {
	case batteryschedule.ChargeMax:
		w = "Charge"
	case batteryschedule.DischargeMax:
		w = "Power your home"
	case batteryschedule.AvoidImport:
		w = "Use no grid energy"
	default:
		w = "Keep charge for your home"
	}
	if !allowDeviation {
		w += " (asked by the grid)"
	}
	return w
}
