package restapi

import (
	"net/http"
	"slices"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/web"
)

// The notification endpoints (docs/notifications.md, "Subscribe") map requests onto the
// subscription use cases.

// maxURL bounds a subscription's url (as the CRD does).
const maxURL = events.MaxURL

func (a *API) createSubscription(r *http.Request, p *auth.Principal) (any, error) {
	var raw string
	var wanted []flexv1.EventType
	if err := readBody(r, func(f *fields, body map[string]any) {
		raw, wanted = parseSubscription(f, body)
		// An address literal is judged now, as every delivery would judge it (a name is
		// judged on its addresses at each delivery).
		if raw != "" && len(f.Items()) == 0 {
			if err := a.NotificationPolicy.CheckURLHost(raw); err != nil {
				f.Add(err.Error(), "value_error", []any{"body", "url"})
			}
		}
	}); err != nil {
		return nil, err
	}
	created, err := a.Subscriptions.Create(r.Context(), p, raw, wanted)
	if err != nil {
		return nil, err
	}
	return web.WithStatus{Status: http.StatusCreated, Body: created}, nil
}

// parseSubscription reads a subscription request: an https url and distinct event types.
func parseSubscription(f *fields, body map[string]any) (string, []flexv1.EventType) {
	loc := []any{"body"}
	raw, _ := f.Str(body, loc, "url", true)
	if raw != "" {
		if msg := checkURL(raw); msg != "" {
			f.Add(msg, "value_error", at(loc, "url"))
		}
	}
	var wanted []flexv1.EventType
	if list, ok := f.Array(body, loc, "events", false); ok {
		for i, v := range list {
			if t, ok := web.EnumValue(f, v, at(at(loc, "events"), i), flexv1.AllEventTypes); ok && !slices.Contains(wanted, t) {
				wanted = append(wanted, t)
			}
		}
	}
	return raw, wanted
}

// checkURL is the form a subscription's url must have (events.CheckURL).
func checkURL(raw string) string { return events.CheckURL(raw) }

func (a *API) listSubscriptions(r *http.Request, p *auth.Principal) (any, error) {
	return a.Subscriptions.List(r.Context(), p)
}

func (a *API) getSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return a.Subscriptions.Get(r.Context(), p, r.PathValue("subscription_id"))
}

func (a *API) deleteSubscription(r *http.Request, p *auth.Principal) (any, error) {
	if err := a.Subscriptions.Delete(r.Context(), p, r.PathValue("subscription_id")); err != nil {
		return nil, err
	}
	return web.NoContent{}, nil
}

func (a *API) testSubscription(r *http.Request, p *auth.Principal) (any, error) {
	accepted, err := a.Subscriptions.Test(r.Context(), p, r.PathValue("subscription_id"))
	if err != nil {
		return nil, err
	}
	return web.WithStatus{Status: http.StatusAccepted, Body: accepted}, nil
}

func (a *API) subscriptionDeliveries(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	limit := f.QueryInt(r.URL.Query(), "limit", 20, 1, 20)
	if err := f.Err(); err != nil {
		return nil, err
	}
	return a.Subscriptions.Deliveries(r.Context(), p, r.PathValue("subscription_id"), limit)
}
