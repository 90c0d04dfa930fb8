package openadr

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/auth"
)

func (d *Door) searchVens(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) createVen(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) getVen(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) updateVen(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) deleteVen(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) searchResources(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) createResource(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) getResource(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) updateResource(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) deleteResource(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
