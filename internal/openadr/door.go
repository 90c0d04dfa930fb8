// Package openadr is the OpenADR 3 door (docs/openadr.md): Flexsite as a VTN, serving every
// operation of the OpenADR Alliance's 3.0.1 document under /openadr3/3.0.1. Like the REST API it
// decides no rule: each handler reads the document's shapes (internal/openadr/oadr) into a use
// case's typed input (internal/app), and translates what the use case answers back into the
// document's shapes, its refusals into the document's problem form.
package openadr

import (
	"net/http"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app/flexevents"
	subscriptionuses "github.com/flexsite/flexsite/internal/app/subscriptions"
	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/auth"
	notification "github.com/flexsite/flexsite/internal/events"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web"
)

// Config wires the door to the use cases it translates for.
type Config struct {
	Log logr.Logger
	// VTN holds the use cases only this door needs: programs, VENs, resources, reports, events.
	VTN *vtn.Service
	// FlexEvents declares and cancels the organisation's flex events (POST and DELETE /events).
	FlexEvents *flexevents.Service
	// Subscriptions keeps the organisation's notification subscriptions, OpenADR's among them;
	// NotificationPolicy is the deliverer's address policy, which their callback URLs must meet.
	Subscriptions      *subscriptionuses.Service
	NotificationPolicy notification.AddressPolicy
	// Guard authenticates the routes and checks auth/token's client credentials (under the
	// login budgets); Issuer issues the tokens.
	Guard  *web.Authenticator
	Issuer *auth.Issuer
}

// Door is the OpenADR 3 door.
type Door struct{ Config }

// New builds the door.
func New(cfg Config) *Door { return &Door{Config: cfg} }

// Routes lists every operation of the Alliance's document, under oadr.BasePath: the server
// mounts them, and a test compares them with the document, so neither can drift.
//
// Each route is guarded by the scope the document names for it, as the roles that scope maps
// onto (scopes.go): an OpenADR token reaches nothing a REST token of the same roles could not.
func (d *Door) Routes() []web.Route {
	const (
		programs      = "/programs"
		program       = "/programs/{programID}"
		reports       = "/reports"
		report        = "/reports/{reportID}"
		events        = "/events"
		event         = "/events/{eventID}"
		subscriptions = "/subscriptions"
		subscription  = "/subscriptions/{subscriptionID}"
		vens          = "/vens"
		ven           = "/vens/{venID}"
		resources     = "/vens/{venID}/resources"
		resource      = "/vens/{venID}/resources/{resourceID}"
	)
	routes := []struct {
		method, path string
		scope        Scope
		h            web.Handler
	}{
		{http.MethodGet, programs, ScopeReadAll, d.searchPrograms},
		{http.MethodPost, programs, ScopeWritePrograms, d.programsAreDeclared},
		{http.MethodGet, program, ScopeReadAll, d.getProgram},
		{http.MethodPut, program, ScopeWritePrograms, d.programsAreDeclared},
		{http.MethodDelete, program, ScopeWritePrograms, d.programsAreDeclared},

		{http.MethodGet, reports, ScopeReadAll, d.searchReports},
		{http.MethodPost, reports, ScopeWriteReports, d.createReport},
		{http.MethodGet, report, ScopeReadAll, d.getReport},
		{http.MethodPut, report, ScopeWriteReports, d.updateReport},
		{http.MethodDelete, report, ScopeWriteReports, d.deleteReport},

		{http.MethodGet, events, ScopeReadAll, d.searchEvents},
		{http.MethodPost, events, ScopeWriteEvents, d.createEvent},
		{http.MethodGet, event, ScopeReadAll, d.getEvent},
		{http.MethodPut, event, ScopeWriteEvents, d.updateEvent},
		{http.MethodDelete, event, ScopeWriteEvents, d.deleteEvent},

		{http.MethodGet, subscriptions, ScopeReadAll, d.searchSubscriptions},
		{http.MethodPost, subscriptions, ScopeWriteSubscriptions, d.createSubscription},
		{http.MethodGet, subscription, ScopeReadAll, d.getSubscription},
		{http.MethodPut, subscription, ScopeWriteSubscriptions, d.updateSubscription},
		{http.MethodDelete, subscription, ScopeWriteSubscriptions, d.deleteSubscription},

		{http.MethodGet, vens, ScopeReadAll, d.searchVens},
		{http.MethodPost, vens, ScopeWriteVens, d.createVen},
		{http.MethodGet, ven, ScopeReadAll, d.getVen},
		{http.MethodPut, ven, ScopeWriteVens, d.updateVen},
		{http.MethodDelete, ven, ScopeWriteVens, d.deleteVen},

		{http.MethodGet, resources, ScopeReadAll, d.searchResources},
		{http.MethodPost, resources, ScopeWriteVens, d.createResource},
		{http.MethodGet, resource, ScopeReadAll, d.getResource},
		{http.MethodPut, resource, ScopeWriteVens, d.updateResource},
		{http.MethodDelete, resource, ScopeWriteVens, d.deleteResource},
	}
	out := make([]web.Route, 0, len(routes)+1)
	out = append(out, web.Route{Method: http.MethodPost, Path: oadr.BasePath + "/auth/token", Handler: http.HandlerFunc(d.fetchToken)})
	for _, r := range routes {
		out = append(out, web.Route{Method: r.method, Path: oadr.BasePath + r.path, Handler: d.guard(r.h, r.scope)})
	}
	return out
}

// guard authenticates h's caller (an organisation token: end users have no OpenADR door) and
// requires one of the roles scope maps onto; every refusal is a problem.
func (d *Door) guard(h web.Handler, scope Scope) http.Handler {
	roles := scope.Roles()
	return d.Guard.GuardWith(writeProblem, func(r *http.Request, p *auth.Principal) (any, error) {
		for _, role := range roles {
			if p.HasRole(role) {
				return h(r, p)
			}
		}
		return nil, forbidden("The token's scopes do not include %s (the API client lacks the %s role)", scope, rolesText(roles))
	}, false)
}
