package web

import (
	"maps"
	"net/http/httptest"
	"testing"
)

// Every page gets no referrer, no sniffing, no caching; framing is refused unless the page is
// embeddable, and the opener cut unless the page talks to it.
func TestPageHeaders(t *testing.T) {
	common := map[string]string{"Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff",
		"Cache-Control": "no-store"}
	with := func(extra map[string]string) map[string]string {
		out := maps.Clone(common)
		maps.Copy(out, extra)
		return out
	}
	for _, tc := range []struct {
		name string
		page Page
		want map[string]string
	}{
		{"plain", Page{CSP: "default-src 'none'"}, with(map[string]string{"Content-Security-Policy": "default-src 'none'",
			"X-Frame-Options": "DENY", "Cross-Origin-Opener-Policy": "same-origin"})},
		{"embeddable", Page{CSP: "frame-ancestors *", Embeddable: true}, with(map[string]string{
			"Content-Security-Policy": "frame-ancestors *", "Cross-Origin-Opener-Policy": "same-origin"})},
		{"talks to its opener", Page{TalksToOpener: true}, with(map[string]string{"X-Frame-Options": "DENY"})},
	} {
		w := httptest.NewRecorder()
		PageHeaders(w, tc.page)
		got := map[string]string{}
		for name := range w.Header() {
			got[name] = w.Header().Get(name)
		}
		if !maps.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}
