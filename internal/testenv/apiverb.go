package testenv

import (
	"net/http"
	"strings"
)

// APIVerb is the API server's verb of a request: a GET of a collection is a list (a watch
// with ?watch=true), of one object a get.
func APIVerb(r *http.Request) string {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		parts = parts[2:] // namespaces/{ns}/{resource}...; "namespaces/{ns}" alone is a get of a namespace
	}
	collection := len(parts) == 1
	switch r.Method {
	case http.MethodGet:
		if r.URL.Query().Get("watch") == "true" || r.URL.Query().Get("watch") == "1" {
			return "watch"
		}
		if collection {
			return "list"
		}
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if collection {
			return "deletecollection"
		}
		return "delete"
	}
	return strings.ToLower(r.Method)
}
