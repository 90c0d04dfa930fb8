package web

import (
	"net/http"
	"slices"
	"strings"

	"github.com/flexsite/flexsite/internal/auth"
)

// CORS for end-user (component) tokens. A browser on the token's allowed_origin may call the
// routes an end-user token may call, and no other origin is granted anything:
//   - an actual request gets Access-Control-Allow-Origin only when its verified token's
//     allowed_origin equals the request's Origin (corsGrant, from Guard);
//   - a preflight carries no token, so it is answered from the origins recorded on the site
//     when its component tokens were issued (the door's granted function).
//
// Every answer of these routes varies with Origin.

// CORSAllowHeaders are the request headers a granted origin may send.
const CORSAllowHeaders = "authorization, content-type"

// corsMaxAge is how long (seconds) a browser may cache a preflight's answer.
const corsMaxAge = "600"

// varyOrigin is the Vary header's value of an answer whose CORS grant depends on its Origin.
var varyOrigin = []string{"Origin"}

// corsGrant adds the CORS headers of an actual request made with an end-user token.
func corsGrant(w http.ResponseWriter, r *http.Request, p *auth.Principal) {
	if h := w.Header(); h["Vary"] == nil {
		h["Vary"] = varyOrigin // shared, as jsonContentType is: Add would allocate a slice
	} else {
		h.Add("Vary", "Origin")
	}
	origin := r.Header.Get("Origin")
	if p == nil || p.Kind != auth.KindEndUser || origin == "" || origin != p.AllowedOrigin {
		return
	}
	w.Header().Set("Access-Control-Allow-Origin", origin)
	w.Header().Set("Access-Control-Expose-Headers", "Retry-After, X-Request-Id")
}

// Preflight answers OPTIONS on a path whose routes admit end-user tokens; methods are the
// methods of those routes, and granted decides, for a well-formed preflight, whether its
// Origin was recorded for the path's site.
func Preflight(methods []string, granted func(r *http.Request, origin string) bool) http.Handler {
	allow := strings.Join(methods, ", ")
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Origin")
		w.Header().Add("Vary", "Access-Control-Request-Method")
		w.Header().Add("Vary", "Access-Control-Request-Headers")
		if origin := r.Header.Get("Origin"); wellFormedPreflight(r, origin, methods) && granted(r, origin) {
			h := w.Header()
			h.Set("Access-Control-Allow-Origin", origin)
			h.Set("Access-Control-Allow-Methods", allow)
			h.Set("Access-Control-Allow-Headers", CORSAllowHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
		}
		w.WriteHeader(http.StatusNoContent)
	})
}

// wellFormedPreflight: an origin, one of the methods, and only headers that are allowed.
func wellFormedPreflight(r *http.Request, origin string, methods []string) bool {
	if origin == "" || !slices.Contains(methods, r.Header.Get("Access-Control-Request-Method")) {
		return false
	}
	for _, h := range strings.Split(r.Header.Get("Access-Control-Request-Headers"), ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" && !strings.Contains(CORSAllowHeaders, h) {
			return false
		}
	}
	return true
}

// Page is what differs between the headers of the pages Flexsite serves to a browser (the
// hosted flow, the rewards page, the device callback): PageHeaders sets the rest alike.
type Page struct {
	// CSP is the page's Content-Security-Policy; "" for a page's script or stylesheet. Its
	// frame-ancestors says who may frame the page, and must agree with Embeddable.
	CSP string
	// Embeddable: the page is made to be framed by other origins (the hosted flow, in the
	// household's app): no X-Frame-Options. Every other page is DENY.
	Embeddable bool
	// TalksToOpener: the page posts its outcome to the window that opened it (the device
	// callback's popup): no Cross-Origin-Opener-Policy, which would cut window.opener. Every
	// other page is same-origin, in a browsing context group of its own.
	TalksToOpener bool
}

// PageHeaders sets the headers of everything a page serves: no referrer, no sniffing, no
// caching, and what p says of its policy, framing and opener.
func PageHeaders(w http.ResponseWriter, p Page) {
	h := w.Header()
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	if !p.TalksToOpener {
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
	}
	if !p.Embeddable {
		h.Set("X-Frame-Options", "DENY")
	}
	if p.CSP != "" {
		h.Set("Content-Security-Policy", p.CSP)
	}
}

// Route is one (method, path template) a door serves, and its handler.
type Route struct {
	Method, Path string
	Handler      http.Handler
	// Pattern, when set, is the mux pattern that serves Path instead of Path itself: two
	// documented paths Go's ServeMux refuses side by side (GET /entities/asset/external-id/{x}
	// and GET /entities/asset/{asset_id}/intent both match /entities/asset/external-id/intent)
	// share one pattern, mounted once, whose handler tells them apart.
	Pattern string
}

// EndUserRoute marks, in a route table, a route an end-user token may call.
type EndUserRoute struct{ http.Handler }

// EndUserMethods maps each path of the routes an end-user token may call to their methods.
func EndUserMethods(routes []Route) map[string][]string {
	out := map[string][]string{}
	for _, e := range routes {
		if _, ok := e.Handler.(EndUserRoute); ok {
			out[e.Path] = append(out[e.Path], e.Method)
		}
	}
	return out
}
