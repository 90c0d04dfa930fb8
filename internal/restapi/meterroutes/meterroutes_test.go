package meterroutes_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/flexsite/flexsite/internal/restapi/meterroutes"
)

// Every path of the mux patterns the group shares reaches exactly its handler, named by its
// documented path.
func TestPatternsReachTheirHandlers(t *testing.T) {
	var got, ref, pattern string
	answer := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, ref, pattern = name, r.PathValue("meter_ref"), r.Pattern
		})
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+meterroutes.PairPattern, meterroutes.PairHandler(answer("by-ref"), answer("not found")))
	mux.Handle("GET "+meterroutes.ByAddressPattern, meterroutes.DocumentedAs("GET /meter/", answer("by-address")))
	mux.Handle("GET /meter/{mpan}", answer("by-mpan"))
	mux.Handle("GET /meter/search", answer("search"))
	mux.Handle("/", answer("not found"))
	for _, c := range []struct{ path, handler, ref, pattern string }{
		{"/meter/by-ref/AbC-_1", "by-ref", "AbC-_1", "GET /meter/by-ref/{meter_ref}"},
		{"/meter/AbC-_1/mpan", "by-ref", "AbC-_1", "GET /meter/{meter_ref}/mpan"},
		{"/meter/by-ref/mpan", "by-ref", "mpan", "GET /meter/by-ref/{meter_ref}"},
		{"/meter/AbC/other", "not found", "", ""},
		{"/meter/?address=x", "by-address", "", "GET /meter/"},
		{"/meter/1200123456787", "by-mpan", "", ""},
		{"/meter/search?postcode=x", "search", "", ""},
		{"/meter/a/b/c", "not found", "", ""},
	} {
		got, ref, pattern = "", "", ""
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, c.path, nil))
		if got != c.handler || ref != c.ref || (c.pattern != "" && pattern != c.pattern) {
			t.Errorf("GET %s: handler %q, meter_ref %q, pattern %q; want %q, %q, %q", c.path, got, ref, pattern,
				c.handler, c.ref, c.pattern)
		}
	}
}
