// Package devicecallback is the door a maker's cloud sends the household's browser back through
// after a device authorisation (GET /oauth/callback, docs/api.md, "Device connections"): it reads
// the provider's answer into the callback use case (internal/app/devices) and then sends the
// browser on — a 303 to the redirect_uri given at initiate, or a plain Flexsite page that says what
// happened in words and tells the hosted flow that opened it (postMessage to Flexsite's own
// origin). It takes no token: the state is the proof.
package devicecallback

import (
	"crypto/rand"
	"encoding/base64"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app/devices"
	"github.com/flexsite/flexsite/internal/web"
)

// Door serves the OAuth callback.
type Door struct {
	Log     logr.Logger
	Devices *devices.Service
	// PublicURL is the scheme and host of Flexsite (empty: the request's).
	PublicURL string
	// Limits holds the per-address budget of failed callbacks (CallbackFailures), shared with
	// the other doors; TrustedProxies say whose forwarded address to believe.
	Limits         *web.Limiters
	TrustedProxies web.TrustedProxies
}

// Routes is the callback.
func (d *Door) Routes() []web.Route {
	return []web.Route{{Method: http.MethodGet, Path: web.OAuthCallbackPath, Handler: http.HandlerFunc(d.callback)}}
}

// MessageType is the type of the message the plain page posts to the window that opened it.
const MessageType = "flexsite-device-connection"

func (d *Door) callback(w http.ResponseWriter, r *http.Request) {
	// Like the token endpoint: an address whose callbacks keep naming no authorisation in
	// progress is refused before any lookup.
	var failures *web.KeyedLimiter
	if d.Limits != nil {
		failures = d.Limits.CallbackFailures
	}
	address := d.TrustedProxies.ClientAddress(r)
	if failures.Exhausted(address) {
		web.WriteError(d.Log, w, r, web.TooManyRequests(failures, "callback_failures"))
		return
	}
	q := r.URL.Query()
	base := web.PublicBase(d.PublicURL, r)
	res, err := d.Devices.Callback(r.Context(), devices.CallbackInput{State: q.Get("state"), Code: q.Get("code"),
		Error: q.Get("error"), CallbackURL: base + web.OAuthCallbackPath})
	if err == nil && res.Reason == devices.ReasonInvalidState {
		failures.Charge(address)
	}
	if e := web.HTTPError(err); e != nil && e.Status == http.StatusServiceUnavailable {
		// A dependency did not answer: the state and the code are still good, so the same
		// callback (a reload) completes the connection.
		for k, v := range e.Headers {
			w.Header().Set(k, v)
		}
		d.page(w, base, devices.CallbackResult{Reason: "unavailable",
			Message: "We could not finish connecting just now. Nothing was connected yet; reload this page in a moment."},
			http.StatusServiceUnavailable)
		return
	}
	if err != nil {
		d.Log.Error(err, "device authorisation callback")
		res = devices.CallbackResult{Reason: "internal_error",
			Message: "Something went wrong on our side. Nothing was connected; please try again."}
	}
	if res.RedirectURI != "" {
		u, perr := url.Parse(res.RedirectURI)
		if perr == nil {
			v := u.Query()
			if res.Connected {
				v.Set("connection", "connected")
			} else {
				v.Set("connection", "error")
				v.Set("reason", res.Reason)
			}
			if res.Provider != "" {
				v.Set("provider", res.Provider)
			}
			u.RawQuery = v.Encode()
			w.Header().Set("Cache-Control", "no-store")
			w.Header().Set("Referrer-Policy", "no-referrer")
			http.Redirect(w, r, u.String(), http.StatusSeeOther)
			return
		}
	}
	status := http.StatusOK
	if !res.Connected {
		status = http.StatusBadRequest
	}
	d.page(w, base, res, status)
}

var page = template.Must(template.New("callback").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style nonce="{{.Nonce}}">body{font-family:system-ui,sans-serif;max-width:32rem;margin:3rem auto;padding:0 1rem;color:#1a1a1a}</style>
</head><body><main>
<h1 id="outcome" data-status="{{.Status}}">{{.Title}}</h1>
<p id="message">{{.Message}}</p>
<p>You can close this window and go back to where you were.</p>
</main>
<script nonce="{{.Nonce}}">
(function(){
  var msg = {type: {{.Type}}, provider: {{.Provider}}, status: {{.Status}}, reason: {{.Reason}}};
  try { if (window.opener) { window.opener.postMessage(msg, {{.Origin}}); } } catch (e) {}
})();
</script>
</body></html>`))

// page is the plain Flexsite page: the outcome in words, told to the opener on Flexsite's
// own origin (the hosted flow), never to another.
func (d *Door) page(w http.ResponseWriter, base string, res devices.CallbackResult, status int) {
	nonceBytes := make([]byte, 16)
	_, _ = rand.Read(nonceBytes)
	nonce := base64.StdEncoding.EncodeToString(nonceBytes)
	name := res.DisplayName
	if name == "" {
		name = "your provider"
	}
	data := map[string]any{"Nonce": nonce, "Type": MessageType, "Provider": res.Provider, "Reason": res.Reason,
		"Origin": originOf(base)}
	if res.Connected {
		data["Status"], data["Title"] = "connected", "Your "+name+" account is connected"
		data["Message"] = "Flexsite can now look after your devices so that you keep earning rewards."
	} else {
		data["Status"], data["Title"] = "error", "Your account was not connected"
		data["Message"] = res.Message
	}
	web.PageHeaders(w, web.Page{TalksToOpener: true, CSP: "default-src 'none'; script-src 'nonce-" + nonce +
		"'; style-src 'nonce-" + nonce + "'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"})
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	if err := page.Execute(w, data); err != nil {
		d.Log.Error(err, "writing the callback page")
	}
}

func originOf(base string) string {
	u, err := url.Parse(base)
	if err != nil {
		return strings.TrimSuffix(base, "/")
	}
	return u.Scheme + "://" + u.Host
}
