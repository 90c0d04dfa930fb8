package restapi

import (
	"net/http"
	"time"

	"github.com/flexsite/flexsite/internal/app/assetevents"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// The asset events' routes (docs/api.md, "Asset events: what the devices tell Flexsite"): prod's
// AssetEventRequest on /event, and one route per event type with its own request schema. Each
// body is read strictly into the use case's Event (422 naming every problem, with the path's);
// the use case decides the rest (404, 422 for the asset's type, 400 for a tariff).

// assetEventRoute is the asset events' path under an asset.
const assetEventRoute = "/entities/asset/{asset_id}/event"

// assetPairPattern serves GET /entities/asset/external-id/{external_id} and GET
// /entities/asset/{asset_id}/intent: Go's ServeMux refuses the two side by side (both match
// /entities/asset/external-id/intent), so they share this one (web.Route.Pattern).
const assetPairPattern = "/entities/asset/{asset_ref}/{asset_sub}"

// assetPairHandler tells the paths of assetPairPattern apart: the literal external-id segment
// wins, as it did when the external-id route was alone (an asset id is a UUID, never
// "external-id"); otherwise the last segment names the asset's read (bySub: "intent",
// "price-curve", ...). The request's Pattern is set to the documented path, which the access
// log and the metrics name.
func assetPairHandler(byExternalID http.Handler, bySub map[string]http.Handler) http.Handler {
	// Each word's route pattern, made once (not per request).
	patterns := make(map[string]string, len(bySub))
	for sub := range bySub {
		patterns[sub] = "GET /entities/asset/{asset_id}/" + sub
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ref, sub := r.PathValue("asset_ref"), r.PathValue("asset_sub")
		if ref == "external-id" {
			r.SetPathValue("external_id", sub)
			r.Pattern = "GET /entities/asset/external-id/{external_id}"
			byExternalID.ServeHTTP(w, r)
			return
		}
		h, ok := bySub[sub]
		if !ok {
			notFound(w, r)
			return
		}
		r.SetPathValue("asset_id", ref)
		r.Pattern = patterns[sub]
		h.ServeHTTP(w, r)
	})
}

// assetEvent handles a named route: t is its event type; parse reads what its schema carries.
func (a *API) assetEvent(t assetevents.Type, parse func(f *fields, body map[string]any, ev *assetevents.Event)) web.Handler {
	return func(r *http.Request, p *auth.Principal) (any, error) {
		ev := assetevents.Event{Type: t}
		var id string
		err := readBody(r, func(f *fields, body map[string]any) {
			id = f.UUIDParam(r, "asset_id")
			if parse != nil {
				parse(f, body, &ev)
			}
		})
		if err != nil {
			return nil, err
		}
		return a.AssetEvents.Record(r.Context(), p, id, ev)
	}
}

// postAssetEvent handles prod's generic AssetEventRequest: event_type names the event; the
// intent, vehicle, tariff and end_at are read whatever the type (prod says which types should
// carry them, and keeps what it is sent).
func (a *API) postAssetEvent(r *http.Request, p *auth.Principal) (any, error) {
	var ev assetevents.Event
	var id string
	err := readBody(r, func(f *fields, body map[string]any) {
		id = f.UUIDParam(r, "asset_id")
		ev.Type, _ = web.Enum(f, body, []any{"body"}, "event_type", true, assetevents.EventTypes)
		readPlugIn(f, body, &ev)
		ev.EndAt = endAt(f, body, false)
	})
	if err != nil {
		return nil, err
	}
	return a.AssetEvents.Record(r.Context(), p, id, ev)
}

// assetEventHandler is the handler of the event route under /event (route "" is the generic
// one).
func (a *API) assetEventHandler(route string) web.Handler {
	switch route {
	case "":
		return a.postAssetEvent
	case "/plug-in":
		return a.assetEvent(assetevents.PlugIn, readPlugIn)
	case "/plug-out":
		return a.assetEvent(assetevents.PlugOut, nil)
	case "/intent":
		return a.assetEvent(assetevents.IntentUpdate, readIntentEvent)
	case "/charge-now":
		return a.assetEvent(assetevents.ChargeNow, readChargeNow)
	case "/charge-now-deleted":
		return a.assetEvent(assetevents.ChargeNowDeleted, nil)
	case "/tariff-update":
		return a.assetEvent(assetevents.TariffUpdate, readTariffUpdate)
	}
	panic("restapi: no asset event route " + route)
}

func (a *API) latestIntent(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("asset_id"), "asset_id")
	if err != nil {
		return nil, err
	}
	return a.AssetEvents.LatestIntent(r.Context(), p, id)
}

// readPlugIn reads PlugInEventRequest's optional intent, vehicle and tariff.
func readPlugIn(f *fields, body map[string]any, ev *assetevents.Event) {
	ev.Intent = readIntent(f, body, []any{"body"}, false)
	ev.Vehicle = readVehicle(f, body, []any{"body"})
	ev.Tariff = readTariff(f, body, []any{"body"}, false)
}

func readIntentEvent(f *fields, body map[string]any, ev *assetevents.Event) {
	ev.Intent = readIntent(f, body, []any{"body"}, true)
}

func readChargeNow(f *fields, body map[string]any, ev *assetevents.Event) {
	ev.EndAt = endAt(f, body, true)
}

func readTariffUpdate(f *fields, body map[string]any, ev *assetevents.Event) {
	ev.Tariff = readTariff(f, body, []any{"body"}, true)
}

// endAt reads a charge-now's end: a date-time with its zone (an instant).
func endAt(f *fields, body map[string]any, required bool) *time.Time {
	t, ok := f.Timestamp(body, []any{"body"}, "end_at", required)
	if !ok {
		return nil
	}
	return &t
}

// readIntent reads prod's Intent at loc+"intent": energy_required_kwh and ready_by required,
// ready_by_local_time a time, charging_mode one of ChargingMode (default
// maximise_charging_time), may_charge_peak default false.
func readIntent(f *fields, body map[string]any, loc []any, required bool) *assetevents.Intent {
	obj, ok := f.Object(body, loc, "intent", required)
	if !ok {
		return nil
	}
	loc = at(loc, "intent")
	in := &assetevents.Intent{ChargingMode: assetevents.MaximiseChargingTime}
	if _, ok := f.Lookup(obj, loc, "energy_required_kwh", true); ok {
		if kwh := f.NonNegative(obj, loc, "energy_required_kwh"); kwh != nil {
			in.EnergyRequiredKWh = *kwh
		}
	}
	if _, ok := f.Timestamp(obj, loc, "ready_by", true); ok {
		in.ReadyBy, _ = obj["ready_by"].(string) // kept as sent: an instant with its zone
	}
	if raw, ok := f.Str(obj, loc, "ready_by_local_time", false); ok {
		if wall, err := validation.ParseWallTime(raw); err != nil {
			f.AddValidation(err, at(loc, "ready_by_local_time"))
		} else {
			in.ReadyByLocalTime = validation.FormatWallTime(wall)
		}
	}
	if _, ok := f.Lookup(obj, loc, "energy_estimated", false); ok {
		estimated := f.Boolean(obj, loc, "energy_estimated")
		in.EnergyEstimated = &estimated
	}
	in.MayChargePeak = f.Boolean(obj, loc, "may_charge_peak")
	if mode, ok := web.Enum(f, obj, loc, "charging_mode", false, assetevents.ChargingModes); ok {
		in.ChargingMode = mode
	}
	return in
}

// readVehicle reads prod's Vehicle (charging_rate_kw required).
func readVehicle(f *fields, body map[string]any, loc []any) *assetevents.Vehicle {
	obj, ok := f.Object(body, loc, "vehicle", false)
	if !ok {
		return nil
	}
	loc = at(loc, "vehicle")
	v := &assetevents.Vehicle{}
	if _, ok := f.Lookup(obj, loc, "charging_rate_kw", true); ok {
		if kw := f.NonNegative(obj, loc, "charging_rate_kw"); kw != nil {
			v.ChargingRateKW = *kw
		}
	}
	return v
}

// readTariff reads prod's Tariff's shape (off_peak_times and timezone required strings,
// tariff_type one of TariffType); whether the times and the zone hold is the use case's
// (400, prod's code).
func readTariff(f *fields, body map[string]any, loc []any, required bool) *assetevents.Tariff {
	obj, ok := f.Object(body, loc, "tariff", required)
	if !ok {
		return nil
	}
	loc = at(loc, "tariff")
	t := &assetevents.Tariff{}
	t.OffPeakTimes, _ = f.Str(obj, loc, "off_peak_times", true)
	t.Timezone, _ = f.Str(obj, loc, "timezone", true)
	t.TariffType, _ = web.Enum(f, obj, loc, "tariff_type", false, assetevents.TariffTypes)
	return t
}
