package restapi

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// readBody reads a JSON body into the fields parse reads (web.ReadBody).
var readBody = web.ReadBody

// siteAction reads the body of an action on {site_id} (enrol, unenrol, meter-consent, ...),
// then the path's site id: the body's problems are answered first, as they always were.
func siteAction(r *http.Request, parse func(f *fields, body map[string]any)) (string, error) {
	if err := readBody(r, parse); err != nil {
		return "", err
	}
	return pathID(r.PathValue("site_id"), "site_id")
}

func (a *API) onboard(r *http.Request, p *auth.Principal) (any, error) {
	var in app.OnboardInput
	err := readBody(r, func(f *fields, body map[string]any) {
		in.Proposition, _ = web.Enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
		in.Override = f.Boolean(body, []any{"body"}, "override_withdrawal")
		in.UpsertInput = parseUpsert(f, body, a.Now())
	})
	if err != nil {
		app.CountOnboard(err)
		return nil, err
	}
	return a.Households.Onboard(r.Context(), p, in)
}

func (a *API) initialise(r *http.Request, p *auth.Principal) (any, error) {
	var in app.UpsertInput
	if err := readBody(r, func(f *fields, body map[string]any) { in = parseUpsert(f, body, a.Now()) }); err != nil {
		return nil, err
	}
	return a.Households.Initialise(r.Context(), p, in)
}

// legacyOnboard is the deprecated POST /entities/site/onboard-site-and-asset.
func (a *API) legacyOnboard(r *http.Request, p *auth.Principal) (any, error) {
	var in app.LegacyOnboardInput
	err := readBody(r, func(f *fields, body map[string]any) {
		if site, ok := f.Object(body, []any{"body"}, "site", true); ok {
			in.Site = parseSite(f, site, []any{"body", "site"}, a.Now())
		}
		if asset, ok := f.Object(body, []any{"body"}, "asset", true); ok {
			in.Asset = parseAsset(f, asset, []any{"body", "asset"}, a.Now())
		}
		if consent, ok := f.Object(body, []any{"body"}, "dispatch_consent", true); ok {
			loc := []any{"body", "dispatch_consent", "dispatch_methods"}
			items, _ := f.Array(consent, loc[:2], "dispatch_methods", true)
			for i, item := range items {
				if m, ok := web.EnumValue(f, item, at(loc, i), allDispatchMethods); ok {
					in.DispatchMethods = append(in.DispatchMethods, m)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	return a.Households.LegacyOnboard(r.Context(), p, in)
}

func (a *API) getSite(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	return a.Households.GetSite(r.Context(), p, id)
}

func (a *API) listSites(r *http.Request, p *auth.Principal) (any, error) {
	q := make(url.Values, 4)
	web.QueryInto(q, r.URL.RawQuery)
	f := &fields{}
	pg := paging(f, q)
	filter := app.SiteFilter{MPAN: strings.TrimSpace(q.Get("mpan")), Postcode: q.Get("postcode")}
	if filter.Postcode != "" {
		if norm, err := validation.NormalisePostcode(filter.Postcode); err == nil {
			filter.Postcode = norm
		}
	}
	if err := f.Err(); err != nil {
		return nil, err
	}
	return a.Households.ListSites(r.Context(), p, filter, pg)
}

func (a *API) patchSite(r *http.Request, p *auth.Principal) (any, error) {
	var in app.SiteUpdate
	id, err := siteAction(r, func(f *fields, body map[string]any) { in = parseSiteUpdate(f, body) })
	if err != nil {
		return nil, err
	}
	return a.Households.PatchSite(r.Context(), p, id, in)
}

func (a *API) eligibility(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	return a.Households.EligibilityJSON(r.Context(), p, id)
}

func (a *API) enrol(r *http.Request, p *auth.Principal) (any, error) {
	var in app.EnrolInput
	id, err := siteAction(r, func(f *fields, body map[string]any) {
		in.Proposition, _ = web.Enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
		in.Override = f.Boolean(body, []any{"body"}, "override_withdrawal")
		in.Consent = consent(f, body, []any{"body"}, false, a.Now())
	})
	if err != nil {
		app.CountEnrolment(err)
		return nil, err
	}
	return a.Households.Enrol(r.Context(), p, id, in)
}

func (a *API) unenrol(r *http.Request, p *auth.Principal) (any, error) {
	var prop flexv1.PropositionName
	id, err := siteAction(r, func(f *fields, body map[string]any) {
		prop, _ = web.Enum(f, body, []any{"body"}, "proposition", true, flexv1.AllPropositions)
	})
	if err != nil {
		return nil, err
	}
	return a.Households.Unenrol(r.Context(), p, id, prop)
}

func (a *API) meterConsent(r *http.Request, p *auth.Principal) (any, error) {
	var at *time.Time
	id, err := siteAction(r, func(f *fields, body map[string]any) { at = consent(f, body, []any{"body"}, true, a.Now()) })
	if err != nil {
		return nil, err
	}
	return a.Households.MeterConsent(r.Context(), p, id, *at)
}

func (a *API) offboard(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	return a.Households.Offboard(r.Context(), p, id)
}

func (a *API) deleteSite(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	if err := a.Households.DeleteSite(r.Context(), p, id); err != nil {
		return nil, err
	}
	return web.NoContent{}, nil
}

func (a *API) checkEligibility(r *http.Request, p *auth.Principal) (any, error) {
	var mpan, model string
	err := readBody(r, func(f *fields, body map[string]any) {
		loc := []any{"body"}
		if raw, ok := f.Str(body, loc, "mpan", true); ok {
			if norm, err := validation.NormaliseMPAN(raw); err != nil {
				f.AddValidation(err, at(loc, "mpan"))
			} else {
				mpan = norm
			}
		}
		if m, ok := f.Str(body, loc, "asset_model", false); ok {
			model = m
		}
	})
	if err != nil {
		return nil, err
	}
	return a.Households.CheckEligibility(r.Context(), p, mpan, model)
}

func (a *API) dispatchConsent(r *http.Request, p *auth.Principal) (any, error) {
	return a.changeDispatch(r, p, household.ConsentDispatch)
}

func (a *API) dispatchDeconsent(r *http.Request, p *auth.Principal) (any, error) {
	return a.changeDispatch(r, p, household.DeconsentDispatch)
}

func (a *API) changeDispatch(r *http.Request, p *auth.Principal, change app.DispatchChange) (any, error) {
	var methods []flexv1.DispatchMethod
	id, err := siteAction(r, func(f *fields, body map[string]any) { methods = dispatchMethods(f, body, []any{"body"}) })
	if err != nil {
		return nil, err
	}
	return a.Households.ChangeDispatch(r.Context(), p, id, change, methods)
}
