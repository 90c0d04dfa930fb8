package restapi

import (
	"encoding/json"
	"net/http"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/flexevents"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// The flex event endpoints (docs/api.md, "Flex events are money") map requests
// onto internal/app/flexevents. The door reads the body's shapes (a timestamp, a number);
// the use case applies the event's rules (validation.CheckFlexEvent, the ones the FlexEvent
// admission webhook applies).

// allPropositions are the propositions a flex event may name (the PropositionName enum).
var allPropositions = []flexv1.PropositionName{"limited_pause", "full_asset_schedule_control", "price_curve"}

func (a *API) createFlexEvent(r *http.Request, p *auth.Principal) (any, error) {
	var in flexevents.CreateInput
	if err := readBody(r, func(f *fields, body map[string]any) { in = parseFlexEvent(f, body) }); err != nil {
		return nil, err
	}
	created, err := a.FlexEvents.Create(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	return web.WithStatus{Status: http.StatusCreated, Body: created}, nil
}

// parseFlexEvent reads {proposition*, start_at*, end_at*, direction*, rate_pence_per_kwh*,
// site_ids, market}, every problem as one 422.
func parseFlexEvent(f *fields, body map[string]any) flexevents.CreateInput {
	loc := []any{"body"}
	var in flexevents.CreateInput
	in.Proposition, _ = web.Enum(f, body, loc, "proposition", true, allPropositions)
	in.Start, _ = f.Timestamp(body, loc, "start_at", true)
	in.End, _ = f.Timestamp(body, loc, "end_at", true)
	if _, present := body["market"]; present {
		// Optional, but not empty: absent is the default (the proposition).
		in.Market, _ = f.Str(body, loc, "market", true)
	}
	if v, ok := f.Lookup(body, loc, "direction", true); ok {
		d, _ := v.(string) // not a string: "", which the rules refuse as not a direction
		in.Direction = flexv1.FlexDirection(d)
	}
	if v, ok := f.Lookup(body, loc, "rate_pence_per_kwh", true); ok {
		n, isNum := v.(json.Number)
		x, err := n.Float64()
		switch {
		case !isNum || err != nil:
			f.Add("Input should be a valid number", "float_type", at(loc, "rate_pence_per_kwh"))
		default:
			c, err := validation.FlexRateNumber(x)
			if err != nil {
				f.AddValidation(err, at(loc, "rate_pence_per_kwh"))
			}
			in.RateCentipence = c
		}
	}
	if list, ok := f.Array(body, loc, "site_ids", false); ok {
		if len(list) > 1000 {
			f.Add("List should have at most 1000 items", "too_long", at(loc, "site_ids"))
		}
		for i, v := range list {
			s, _ := v.(string)
			id, err := validation.ParseUUID(s)
			if err != nil {
				f.AddValidation(err, at(at(loc, "site_ids"), i))
				continue
			}
			in.SiteIDs = append(in.SiteIDs, id)
		}
	}
	return in
}

func (a *API) listFlexEvents(r *http.Request, p *auth.Principal) (any, error) {
	return a.FlexEvents.List(r.Context(), p)
}

func (a *API) getFlexEvent(r *http.Request, p *auth.Principal) (any, error) {
	return a.FlexEvents.Get(r.Context(), p, r.PathValue("id"))
}

func (a *API) siteFlexEvents(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	return a.FlexEvents.ForSite(r.Context(), p, id)
}
