package devicecallback

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"testing"

	"github.com/flexsite/flexsite/internal/app/devices"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// The callback page's headers: its nonce policy, never framed (X-Frame-Options DENY added to
// frame-ancestors 'none'), and no Cross-Origin-Opener-Policy, which would cut the
// window.opener it posts the outcome to.
func TestCallbackPageHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	(&Door{}).page(w, "https://flexsite.example", devices.CallbackResult{Connected: true}, http.StatusOK)
	got := webtest.SecurityHeaders(w.Header())
	csp := regexp.MustCompile(`'nonce-[^']+'`).ReplaceAllString(got["Content-Security-Policy"], "'nonce-N'")
	got["Content-Security-Policy"] = csp
	want := map[string]string{
		"Content-Security-Policy": "default-src 'none'; script-src 'nonce-N'; style-src 'nonce-N'; frame-ancestors 'none'; " +
			"base-uri 'none'; form-action 'none'",
		"X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-store"}
	if !maps.Equal(got, want) {
		t.Errorf("headers %v, want %v", got, want)
	}
}
