package web

import "net/http"

// MarkInteractive tells interactive of every request that may write, for as long as it is
// served: those are what a person or client waits on while the controllers' background work
// (a catalogue change re-evaluating every site) competes for the same API server. Reads are
// served from the cache and need no API server, so they are not counted.
func MarkInteractive(interactive interface{ Begin() (end func()) }, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			end := interactive.Begin()
			defer end()
		}
		next.ServeHTTP(w, r)
	})
}
