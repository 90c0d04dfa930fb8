package restapi

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/app/pricing"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/validation"
)

// plugInSchedule is POST /entities/asset/{asset_id}/event/plug-in-schedule (prod's
// PlugInScheduleEventRequest): each block's timestamps are read as instants (RFC 3339 with a
// zone, 422 at the field otherwise); the use case checks the schedule's shape and answers it.
func (a *API) plugInSchedule(r *http.Request, p *auth.Principal) (any, error) {
	var id string
	var blocks []pricing.Block
	err := readBody(r, func(f *fields, body map[string]any) {
		id = f.UUIDParam(r, "asset_id")
		items, ok := f.Array(body, []any{"body"}, "charging_schedule", true)
		if !ok {
			return
		}
		if len(items) > pricing.MaxScheduleBlocks {
			blocks = make([]pricing.Block, len(items)) // the use case refuses the count
			return
		}
		for i, item := range items {
			loc := []any{"body", "charging_schedule", i}
			obj, ok := item.(map[string]any)
			if !ok {
				f.Add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", loc)
				continue
			}
			var b pricing.Block
			b.Start, _ = f.Timestamp(obj, loc, "start_timestamp", true)
			b.End, _ = f.Timestamp(obj, loc, "end_timestamp", true)
			blocks = append(blocks, b)
		}
	})
	if err != nil {
		return nil, err
	}
	return a.Pricing.PlugInSchedule(r.Context(), p, id, blocks)
}

// withQuery serves a request that carries the query parameter name (even empty) with with,
// any other with plain: one route whose query reaches further needs more of its caller.
func withQuery(name string, plain, with http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has(name) {
			with.ServeHTTP(w, r)
			return
		}
		plain.ServeHTTP(w, r)
	})
}

// exampleChargingProfile is GET /examples/ocpp-charging-profile: prod's example
// SetChargingProfileRequest, or with ?asset_id= (Flexsite's extension) the profile of that
// asset's latest answered plug-in schedule.
func (a *API) exampleChargingProfile(r *http.Request, p *auth.Principal) (any, error) {
	var assetID string
	if raw := r.URL.Query().Get("asset_id"); raw != "" {
		id, err := validation.ParseUUID(raw)
		if err != nil {
			f := &fields{}
			f.AddValidation(err, []any{"query", "asset_id"})
			return nil, f.Err()
		}
		assetID = id
	}
	return a.Pricing.ChargingProfile(r.Context(), p, assetID)
}
