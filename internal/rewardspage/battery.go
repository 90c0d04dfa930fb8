package rewardspage

import (
	"fmt"

	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/web/batterychart"
)

// batteryPlans draws the household's battery plans (internal/web/batterychart), each with ids
// of its own in the page.
func batteryPlans(plans []pricing.BatteryPlan) []batterychart.Plan {
	out := make([]batterychart.Plan, 0, len(plans))
	for i, p := range plans {
		out = append(out, batterychart.Draw(fmt.Sprintf("battery-plan-%d", i+1), p.Steps, p.Prices))
	}
	return out
}
