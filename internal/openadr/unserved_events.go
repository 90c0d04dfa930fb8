package openadr

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/auth"
)

func (d *Door) searchEvents(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) createEvent(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) getEvent(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) updateEvent(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) deleteEvent(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
