// Package tenancy keeps organisations apart where they meet: the username an API client logs
// in with. A username belongs to at most one API client in the whole cluster, whichever
// namespace (organisation) the clients live in; otherwise one organisation could create a
// client with another's username and lock it out (a login never picks one of two clients).
//
// Two doors apply the rule. Admission (webhook/apiclient_webhook.go) refuses a client whose
// username another client holds, and closes the race between two clients created at the same
// moment with a cluster-scoped UsernameClaim named after the username: the API server lets
// only one of them create it. Login (internal/auth) logs in only a username's sole holder, so
// clients stored before the webhook existed, or while it was not installed, never let one
// organisation act as another: a shared username logs nobody in.
package tenancy

import (
	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// Holders are the API clients of clients that hold username: those with that username that
// are not being deleted (a client on its way out neither logs in nor keeps the name from
// anyone). Usernames compare exactly, as login does.
func Holders(clients []flexv1.APIClient, username string) []*flexv1.APIClient {
	var out []*flexv1.APIClient
	for i := range clients {
		c := &clients[i]
		if c.Spec.Username == username && c.DeletionTimestamp.IsZero() {
			out = append(out, c)
		}
	}
	return out
}

// Owner is the API client username logs in as: its only holder among clients. It is nil when
// no client holds the username, and nil too when more than one does (holders says how many),
// because picking one would hand one organisation's access to whichever sorts first.
func Owner(clients []flexv1.APIClient, username string) (owner *flexv1.APIClient, holders int) {
	h := Holders(clients, username)
	if len(h) != 1 {
		return nil, len(h)
	}
	return h[0], 1
}
