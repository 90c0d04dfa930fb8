package restapi

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/auth"
)

// createSite is POST /entities/site: prod's SiteRequest, a site alone (docs/api.md,
// "Create site"), read as onboarding reads its site object, at ["body", ...].
func (a *API) createSite(r *http.Request, p *auth.Principal) (any, error) {
	var in app.SiteInput
	if err := readBody(r, func(f *fields, body map[string]any) { in = parseSite(f, body, []any{"body"}, a.Now()) }); err != nil {
		return nil, err
	}
	// SiteRequest names no end user: a site created here is the organisation's, never a
	// component token's household filled in.
	in.ExternalUserID = ""
	return a.Households.CreateSite(r.Context(), p, in)
}
