package restapi

import (
	"net/http"
	"time"

	"github.com/flexsite/flexsite/internal/app/devices"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// The device connections' routes (docs/api.md, "Device connections").

// providerName reads a provider path segment: a DeviceProvider's name (validation.ProviderName).
func providerName(raw string) (string, bool) {
	if !validation.ProviderName(raw) {
		return "", false
	}
	return raw, true
}

func (a *API) initiateOAuth(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	prov, ok := providerName(r.PathValue("provider"))
	if !ok {
		return nil, devices.ErrProviderUnknown
	}
	redirect := r.URL.Query().Get("redirect_uri")
	return a.Devices.Initiate(r.Context(), p, devices.InitiateInput{SiteID: id, Provider: prov, RedirectURI: redirect,
		CallbackURL: web.PublicBase(a.PublicURL, r) + web.OAuthCallbackPath})
}

func (a *API) siteToken(r *http.Request, p *auth.Principal) (any, error) {
	var in devices.TokenInput
	err := readBody(r, func(f *fields, body map[string]any) {
		loc := []any{"body"}
		in.TokenType, _ = f.Str(body, loc, "token_type", false)
		in.AccessToken, _ = f.Str(body, loc, "access_token", false)
		apiKey := in.TokenType == "API_KEY"
		in.RefreshToken, _ = f.Str(body, loc, "refresh_token", !apiKey)
		if apiKey && in.AccessToken == "" {
			f.Add("Field required", "missing", at(loc, "access_token"))
		}
		if raw, ok := f.Str(body, loc, "provider", false); ok {
			if prov, ok := providerName(raw); ok {
				in.Provider = prov
			} else {
				f.Add("Input should be a provider name", "value_error", at(loc, "provider"))
			}
		}
		if t, ok := f.Timestamp(body, loc, "expires_utc", false); ok {
			in.ExpiresAt = t
		}
		if v, ok := f.Lookup(body, loc, "expires_in", false); ok {
			n, isNum := v.(interface{ Int64() (int64, error) })
			secs, err := int64(0), error(nil)
			if isNum {
				secs, err = n.Int64()
			}
			if !isNum || err != nil || secs <= 0 || secs > 10*365*24*3600 {
				f.Add("Input should be a positive whole number of seconds", "int_type", at(loc, "expires_in"))
			} else if in.ExpiresAt.IsZero() {
				in.ExpiresAt = a.Now().Add(time.Duration(secs) * time.Second)
			}
		}
	})
	if err != nil {
		return nil, err
	}
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	in.SiteID = id
	if err := a.Devices.StoreToken(r.Context(), p, in); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}

func (a *API) connections(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	return a.Devices.Connections(r.Context(), p, id)
}

func (a *API) disconnect(r *http.Request, p *auth.Principal) (any, error) {
	id, err := pathID(r.PathValue("site_id"), "site_id")
	if err != nil {
		return nil, err
	}
	prov, ok := providerName(r.PathValue("provider"))
	if !ok {
		return nil, devices.ErrConnectionNotFound
	}
	if err := a.Devices.Disconnect(r.Context(), p, id, prov); err != nil {
		return nil, err
	}
	return web.NoContent{}, nil
}
