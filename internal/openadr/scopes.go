package openadr

import (
	"slices"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Scope is one of the document's OAuth 2.0 scopes (securitySchemes.oAuth2ClientCredentials).
type Scope string

// The document's scopes.
const (
	ScopeReadAll            Scope = "read_all"
	ScopeWritePrograms      Scope = "write_programs"
	ScopeWriteEvents        Scope = "write_events"
	ScopeWriteReports       Scope = "write_reports"
	ScopeWriteSubscriptions Scope = "write_subscriptions"
	ScopeWriteVens          Scope = "write_vens"
)

// Scopes are every scope, in the document's order.
var Scopes = []Scope{ScopeReadAll, ScopeWritePrograms, ScopeWriteEvents, ScopeWriteReports,
	ScopeWriteSubscriptions, ScopeWriteVens}

// scopeRoles maps each scope onto the Flexsite roles that grant it (docs/openadr.md, "Tokens
// and scopes"): reading is entity_read; the business logic's writes (events, programs) are
// flex_events_write, the role POST /flex-events needs; a VEN's writes (its VEN, resources and
// reports) are entity_write, the role of the dispatch callback and of readings; subscriptions
// are either's.
var scopeRoles = map[Scope][]flexv1.Role{
	ScopeReadAll:            {flexv1.RoleEntityRead},
	ScopeWritePrograms:      {flexv1.RoleFlexEventsWrite},
	ScopeWriteEvents:        {flexv1.RoleFlexEventsWrite},
	ScopeWriteReports:       {flexv1.RoleEntityWrite},
	ScopeWriteVens:          {flexv1.RoleEntityWrite},
	ScopeWriteSubscriptions: {flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite},
}

// Roles are the roles any one of which grants the scope.
func (s Scope) Roles() []flexv1.Role { return scopeRoles[s] }

// Known tells whether s is one of the document's scopes.
func (s Scope) Known() bool { _, ok := scopeRoles[s]; return ok }

// grantedBy tells whether a client holding roles is granted s.
func (s Scope) grantedBy(roles []flexv1.Role) bool {
	return slices.ContainsFunc(s.Roles(), func(r flexv1.Role) bool { return slices.Contains(roles, r) })
}

// narrow answers the roles of a token asked for with scopes, for a client holding held: the
// held roles that grant one of the scopes asked for, and the scopes granted. Unknown holds the
// first scope that is none of the document's; a scope asked for that grants nothing the client
// holds is left out of granted (the caller refuses a request left with none).
func narrow(held []flexv1.Role, asked []Scope) (roles []flexv1.Role, granted []Scope, unknown Scope) {
	for _, s := range asked {
		if !s.Known() {
			return nil, nil, s
		}
		if !s.grantedBy(held) || slices.Contains(granted, s) {
			continue
		}
		granted = append(granted, s)
		for _, r := range s.Roles() {
			if slices.Contains(held, r) && !slices.Contains(roles, r) {
				roles = append(roles, r)
			}
		}
	}
	// The roles keep the client's order, so that one set of scopes always gives one token.
	slices.SortFunc(roles, func(a, b flexv1.Role) int { return slices.Index(held, a) - slices.Index(held, b) })
	return roles, granted, ""
}

// grantedScopes are the scopes a client holding roles is granted when it asks for none.
func grantedScopes(roles []flexv1.Role) []Scope {
	var out []Scope
	for _, s := range Scopes {
		if s.grantedBy(roles) {
			out = append(out, s)
		}
	}
	return out
}

func scopeText(scopes []Scope) string {
	parts := make([]string, len(scopes))
	for i, s := range scopes {
		parts[i] = string(s)
	}
	return strings.Join(parts, " ")
}

func rolesText(roles []flexv1.Role) string {
	parts := make([]string, len(roles))
	for i, r := range roles {
		parts[i] = string(r)
	}
	return strings.Join(parts, " or ")
}
