package openadr

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/auth"
)

func (d *Door) searchReports(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) createReport(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) getReport(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) updateReport(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}

func (d *Door) deleteReport(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
