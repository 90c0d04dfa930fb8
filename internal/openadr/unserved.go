package openadr

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/auth"
)

// notYet answers an operation whose translation is being written (501, in the problem form):
// each handler below is replaced by its own file's.
func notYet(*http.Request, *auth.Principal) (any, error) {
	return nil, newProblem(http.StatusNotImplemented, "Not served yet")
}

func (d *Door) searchReports(r *http.Request, p *auth.Principal) (any, error) { return notYet(r, p) }
func (d *Door) createReport(r *http.Request, p *auth.Principal) (any, error)  { return notYet(r, p) }
func (d *Door) getReport(r *http.Request, p *auth.Principal) (any, error)     { return notYet(r, p) }
func (d *Door) updateReport(r *http.Request, p *auth.Principal) (any, error)  { return notYet(r, p) }
func (d *Door) deleteReport(r *http.Request, p *auth.Principal) (any, error)  { return notYet(r, p) }
func (d *Door) searchEvents(r *http.Request, p *auth.Principal) (any, error)  { return notYet(r, p) }
func (d *Door) createEvent(r *http.Request, p *auth.Principal) (any, error)   { return notYet(r, p) }
func (d *Door) getEvent(r *http.Request, p *auth.Principal) (any, error)      { return notYet(r, p) }
func (d *Door) updateEvent(r *http.Request, p *auth.Principal) (any, error)   { return notYet(r, p) }
func (d *Door) deleteEvent(r *http.Request, p *auth.Principal) (any, error)   { return notYet(r, p) }
func (d *Door) searchSubscriptions(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
func (d *Door) createSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
func (d *Door) getSubscription(r *http.Request, p *auth.Principal) (any, error) { return notYet(r, p) }
func (d *Door) updateSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
func (d *Door) deleteSubscription(r *http.Request, p *auth.Principal) (any, error) {
	return notYet(r, p)
}
func (d *Door) searchVens(r *http.Request, p *auth.Principal) (any, error)      { return notYet(r, p) }
func (d *Door) createVen(r *http.Request, p *auth.Principal) (any, error)       { return notYet(r, p) }
func (d *Door) getVen(r *http.Request, p *auth.Principal) (any, error)          { return notYet(r, p) }
func (d *Door) updateVen(r *http.Request, p *auth.Principal) (any, error)       { return notYet(r, p) }
func (d *Door) deleteVen(r *http.Request, p *auth.Principal) (any, error)       { return notYet(r, p) }
func (d *Door) searchResources(r *http.Request, p *auth.Principal) (any, error) { return notYet(r, p) }
func (d *Door) createResource(r *http.Request, p *auth.Principal) (any, error)  { return notYet(r, p) }
func (d *Door) getResource(r *http.Request, p *auth.Principal) (any, error)     { return notYet(r, p) }
func (d *Door) updateResource(r *http.Request, p *auth.Principal) (any, error)  { return notYet(r, p) }
func (d *Door) deleteResource(r *http.Request, p *auth.Principal) (any, error)  { return notYet(r, p) }
