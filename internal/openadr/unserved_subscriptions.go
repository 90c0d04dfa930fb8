package openadr

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/auth"
)

func (d *Door) searchSubscriptions(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) createSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) getSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) updateSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) deleteSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
