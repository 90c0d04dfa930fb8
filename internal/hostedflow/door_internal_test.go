package hostedflow

import (
	"maps"
	"net/http/httptest"
	"testing"

	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// The hosted flow's headers: the page and its assets may be framed by any origin (its policy's
// frame-ancestors *, no X-Frame-Options); its JSON routes never (X-Frame-Options DENY added to
// frame-ancestors 'none'); all in a browsing context group of their own.
func TestHostedFlowHeaders(t *testing.T) {
	common := map[string]string{"Cross-Origin-Opener-Policy": "same-origin", "Referrer-Policy": "no-referrer",
		"X-Content-Type-Options": "nosniff", "Cache-Control": "no-store"}
	want := func(extra map[string]string) map[string]string {
		out := maps.Clone(common)
		maps.Copy(out, extra)
		return out
	}
	page, err := Render(DefaultTheme)
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	(&Door{}).page(w, httptest.NewRequest("GET", "/hosted/flow", nil))
	if got, want := webtest.SecurityHeaders(w.Header()), want(map[string]string{"Content-Security-Policy": page.CSP}); !maps.Equal(got, want) {
		t.Errorf("the page: %v, want %v", got, want)
	}
	w = httptest.NewRecorder()
	file("flow.js").ServeHTTP(w, httptest.NewRequest("GET", "/hosted/flow.js", nil))
	if got, want := webtest.SecurityHeaders(w.Header()), want(nil); !maps.Equal(got, want) {
		t.Errorf("its script: %v, want %v", got, want)
	}
	w = httptest.NewRecorder()
	web.PageHeaders(w, apiPage)
	if got, want := webtest.SecurityHeaders(w.Header()), want(map[string]string{
		"Content-Security-Policy": "default-src 'none'; frame-ancestors 'none'", "X-Frame-Options": "DENY"}); !maps.Equal(got, want) {
		t.Errorf("its JSON routes: %v, want %v", got, want)
	}
}
