package hostedflow

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/app/devices"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/web"
)

// The Connect step (docs/hosted-flow.md, "Connect"): the providers of the
// household's assets with their state, and the start of an authorisation at one of them.

// Connections answers GET /hosted/api/connections.
type Connections struct {
	Providers []devices.ProviderState `json:"providers"`
}

func (d *Door) connections(r *http.Request, p *auth.Principal) (any, error) {
	providers, _, err := d.Devices.HouseholdProviders(r.Context(), p)
	if err != nil {
		return nil, err
	}
	return Connections{Providers: providers}, nil
}

// connect answers POST /hosted/api/connections/{provider}: the authorisation URL the page
// opens in a new top-level window. No redirect_uri: the callback's own page tells the flow.
func (d *Door) connect(r *http.Request, p *auth.Principal) (any, error) {
	id, err := d.ownSiteID(r, p)
	if err != nil {
		return nil, err
	}
	return d.Devices.Initiate(r.Context(), p, devices.InitiateInput{SiteID: id, Provider: r.PathValue("provider"),
		CallbackURL: web.PublicBase(d.PublicURL, r) + web.OAuthCallbackPath})
}
