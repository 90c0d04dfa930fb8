package web

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"

	"github.com/flexsite/flexsite/internal/auth"
)

// TestPanickingHandlerAnswersTheErrorForm: a handler bug still answers 500 in the
// documented form (and the next request is served), not a dropped connection.
func TestPanickingHandlerAnswersTheErrorForm(t *testing.T) {
	h := Observe(logr.Discard(), nil, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bug") }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/entities/site", nil))
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", w.Code)
	}
	if body := w.Body.String(); !strings.Contains(body, `"detail":"Internal server error"`) {
		t.Errorf("body %s, want the error form", body)
	}
}

// TestAccessLogNamesThePrincipal: the principal an inner handler learnt (authenticated does)
// reaches the access log line, with the request id the answer carries.
func TestAccessLogNamesThePrincipal(t *testing.T) {
	var lines []string
	log := funcr.New(func(prefix, args string) { lines = append(lines, args) }, funcr.Options{})
	h := Observe(log, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		infoOf(w).principal = &auth.Principal{Kind: auth.KindOrganisation, Namespace: "org-a", ClientName: "client-a"}
		w.WriteHeader(http.StatusNoContent)
	}))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/entities/site", nil))
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1: %q", len(lines), lines)
	}
	for _, want := range []string{`"status"=204`, `"namespace"="org-a"`, `"apiClient"="client-a"`,
		`"requestID"="` + w.Header().Get(HeaderRequestID) + `"`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("access log %s lacks %s", lines[0], want)
		}
	}
}
