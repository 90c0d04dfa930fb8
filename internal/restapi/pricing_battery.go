package restapi

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/auth"
)

// batterySchedule answers GET /entities/asset/{asset_id}/battery-schedule (prod's
// BatteryScheduleResponse): the rule is internal/batteryschedule's.
func (a *API) batterySchedule(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("asset_id"), "asset_id")
	if err != nil {
		return nil, err
	}
	answer, err := a.Pricing.BatterySchedule(r.Context(), p, id)
	if err != nil {
		return nil, err
	}
	return batteryScheduleAnswer(answer), nil
}
