package restapi

import (
	"net/http"
	"net/url"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

func (a *API) createAsset(r *http.Request, p *auth.Principal) (any, error) {
	var in app.AssetInput
	var rawSiteID string
	err := readBody(r, func(f *fields, body map[string]any) {
		in = parseAsset(f, body, []any{"body"}, a.Now())
		rawSiteID, _ = f.Str(body, []any{"body"}, "site_id", true)
	})
	if err != nil {
		return nil, err
	}
	siteID, err := validation.ParseUUID(rawSiteID)
	if err != nil {
		f := &fields{}
		f.AddValidation(err, []any{"body", "site_id"})
		return nil, f.Err()
	}
	return a.Households.CreateAsset(r.Context(), p, siteID, in)
}

func (a *API) getAsset(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("asset_id"), "asset_id")
	if err != nil {
		return nil, err
	}
	return a.Households.GetAsset(r.Context(), p, id)
}

func (a *API) getAssetByExternalID(r *http.Request, p *auth.Principal) (any, error) {
	return a.Households.GetAssetByExternalID(r.Context(), p, r.PathValue("external_id"))
}

// updateAsset fills in the fields the request sends; the path's and the body's problems are
// answered together.
func (a *API) updateAsset(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	id := f.UUIDParam(r, "asset_id")
	body, err := web.DecodeJSON(r)
	if err != nil {
		return nil, f.Join(err)
	}
	in := parseAssetFields(f, body, []any{"body"}, a.Now())
	if err := f.Err(); err != nil {
		return nil, err
	}
	return a.Households.UpdateAsset(r.Context(), p, id, in)
}

func (a *API) deleteAsset(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("asset_id"), "asset_id")
	if err != nil {
		return nil, err
	}
	if err := a.Households.DeleteAsset(r.Context(), p, id); err != nil {
		return nil, err
	}
	return web.NoContent{}, nil
}

func (a *API) listAssets(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	q := make(url.Values, 4)
	web.QueryInto(q, r.URL.RawQuery)
	pg := paging(f, q)
	if err := f.Err(); err != nil {
		return nil, err
	}
	return a.Households.ListAssets(r.Context(), p, pg)
}

func (a *API) validateMPAN(r *http.Request, p *auth.Principal) (any, error) {
	var mpan string
	if err := readBody(r, func(f *fields, body map[string]any) { mpan, _ = f.Str(body, []any{"body"}, "mpan", true) }); err != nil {
		return nil, err
	}
	return a.Meters.ValidateMPAN(r.Context(), p, mpan)
}
