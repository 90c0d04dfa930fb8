package facade

import (
	"net/http"
	"slices"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/validation"
)

// CORS for end-user (component) tokens. A browser on the token's allowed_origin may call the
// routes an end-user token may call, and no other origin is granted anything:
//   - an actual request gets Access-Control-Allow-Origin only when its verified token's
//     allowed_origin equals the request's Origin (corsGrant, from authenticated);
//   - a preflight carries no token, so it is answered from the origins recorded on the site
//     when its component tokens were issued (household.AllowedOriginsAnnotation).
//
// Every answer of these routes varies with Origin.

// corsAllowHeaders are the request headers a granted origin may send.
const corsAllowHeaders = "authorization, content-type"

// corsMaxAge is how long (seconds) a browser may cache a preflight's answer.
const corsMaxAge = "600"

// corsGrant adds the CORS headers of an actual request made with an end-user token.
func corsGrant(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	w.Header().Add("Vary", "Origin")
	origin := r.Header.Get("Origin")
	if p == nil || p.Kind != auth.KindEndUser || origin == "" || origin != p.AllowedOrigin {
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	w.Header().Set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id")
}

// preflight answers OPTIONS on a path whose routes admit end-user tokens; methods are the
// methods of those routes.
func (s *Server) preflight(methods []string) http.Handler {
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		w.Header().Add("Vary", "Access-Control-Request-Method")
		w.Header().Add("Vary", "Access-Control-Request-Headers")
		if s.preflightGranted(r, methods) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", r.Header.Get("Origin"))
			h.Set("Access-Control-Allow-Methods", allow)
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

func (s *Server) preflightGranted(r *http.Request, methods []string) bool {
	origin := r.Header.Get("Origin")
	if origin == "" || !slices.Contains(methods, r.Header.Get("Access-Control-Request-Method")) {
		return false
	}
	for _, h := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" && !strings.Contains(corsAllowHeaders, h) {
			return false
		}
	}
	id, err := validation.ParseUUID(r.PathValue("site_id"))
	if err != nil {
		return false
	}
	ctx := r.Context()
	granted := func(st store) bool {
		list := &flexv1.SiteList{}
		if err := st.r.List(ctx, list, st.byID(id)); err != nil {
			return false
		}
		for i := range list.Items {
			if list.Items[i].DeletionTimestamp.IsZero() && household.OriginAllowed(&list.Items[i], origin) {
				return true
			}
		}
		return false
	}
	if granted(s.store(false)) {
		return true
	}
	// The cache may not have seen a token issued a moment ago. Asking the API server costs
	// an unauthenticated caller from the budget of failed authentications of its address.
	address := s.clientAddress(r)
	if s.limiter.authFailures.exhausted(address) {
		return false
	}
	s.limiter.authFailures.charge(address)
	return granted(s.store(true))
}

// endUserRoute marks, in the route table, a route an end-user token may call.
type endUserRoute struct{ http.Handler }

// endUserMethods maps each path of the routes an end-user token may call to their methods.
func endUserMethods(table []struct {
	Route
	h http.Handler
}) map[string][]string {
	out := map[string][]string{}
	for _, e := range table {
		if _, ok := e.h.(endUserRoute); ok {
			out[e.Path] = append(out[e.Path], e.Method)
		}
	}
	return out
}
