package facade

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-logr/logr"
)

// TestPanickingHandlerAnswersTheErrorForm: a handler bug still answers 500 in the
// documented form (and the next request is served), not a dropped connection.
func TestPanickingHandlerAnswersTheErrorForm(t *testing.T) {
	s := &Server{Config: Config{Log: logr.Discard()}}
	h := s.observe(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("a bug") }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/entities/site", nil))
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", w.Code)
	}
	if body := w.Body.String(); !strings.Contains(body, `"detail":"Internal server error"`) {
		t.Errorf("body %s, want the error form", body)
	}
}
