package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/metrics"
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
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/entities/site", nil))
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

// TestAccessLogOfReadsAtDebug: a read answered without an error leaves its line at debug
// level (V(1)), so the manager at info level writes none; a write, and a read that failed,
// leave theirs at info.
func TestAccessLogOfReadsAtDebug(t *testing.T) {
	for _, c := range []struct {
		method string
		status int
		level  int // -1: no line at info level
	}{
		{http.MethodGet, http.StatusOK, 1},
		{http.MethodHead, http.StatusNoContent, 1},
		{http.MethodOptions, http.StatusNoContent, 1},
		{http.MethodGet, http.StatusNotFound, 0},
		{http.MethodGet, http.StatusUnauthorized, 0},
		{http.MethodGet, http.StatusServiceUnavailable, 0},
		{http.MethodPost, http.StatusOK, 0},
		{http.MethodPatch, http.StatusNoContent, 0},
		{http.MethodDelete, http.StatusNotFound, 0},
	} {
		for _, verbosity := range []int{0, 1} {
			var lines []string
			log := funcr.New(func(_, args string) { lines = append(lines, args) }, funcr.Options{Verbosity: verbosity})
			h := Observe(log, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(c.status) }))
			h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(c.method, "/entities/site", nil))
			want := 1
			if c.level > verbosity {
				want = 0
			}
			if len(lines) != want {
				t.Errorf("%s answered %d, log at V(%d): %d lines, want %d: %q", c.method, c.status, verbosity, len(lines), want, lines)
			}
		}
	}
}

// TestSaneRequestID: a caller's request id is kept only when it is 1 to 128 of
// [A-Za-z0-9._-].
func TestSaneRequestID(t *testing.T) {
	for id, want := range map[string]bool{
		"": false, "a": true, "Req-1.2_3": true, strings.Repeat("x", 128): true, strings.Repeat("x", 129): false,
		"a b": false, "a\nb": false, "é": false, "a/b": false, "a\x00": false,
	} {
		if got := saneRequestID(id); got != want {
			t.Errorf("saneRequestID(%q) = %v, want %v", id, got, want)
		}
	}
}

// TestRequestSeriesKept: a request's metrics are the vectors' own series, looked up once, and
// a caller inventing methods does not grow the kept lookups past their bound.
func TestRequestSeriesKept(t *testing.T) {
	before := testutil.ToFloat64(metrics.HTTPRequests.WithLabelValues("/kept/{x}", "GET", "200"))
	requestSeries("/kept/{x}", "GET", 200).observe(time.Millisecond)
	requestSeries("/kept/{x}", "GET", 200).observe(time.Millisecond)
	if got := testutil.ToFloat64(metrics.HTTPRequests.WithLabelValues("/kept/{x}", "GET", "200")); got != before+2 {
		t.Errorf("counted %v, want %v", got, before+2)
	}
	for i := range 2 * maxKeptSeries {
		requestSeries("unmatched", fmt.Sprintf("M%d", i), 405)
	}
	n := len(*keptSeries.m.Load())
	if n > maxKeptSeries {
		t.Errorf("%d kept series, bound %d", n, maxKeptSeries)
	}
}

// TestNewRequestIDIsAVersion4UUID: the ids made for requests that bring none are random UUIDs
// in canonical form, each new.
func TestNewRequestIDIsAVersion4UUID(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := newRequestID()
		u, err := uuid.Parse(id)
		if err != nil || u.String() != id || u.Version() != 4 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("request id %q is not a canonical version 4 UUID (%v)", id, err)
		}
		if seen[id] {
			t.Fatalf("request id %q made twice", id)
		}
		seen[id] = true
	}
	if allocs := testing.AllocsPerRun(100, func() { _ = newRequestID() }); allocs > 1 {
		t.Errorf("%v allocations a request id, want 1 (its text)", allocs)
	}
}
