// Package meterroutes is the REST API's Meters group (docs/api.md, "Meters: finding a household's
// meter"): the handlers of the seven /meter routes, which internal/restapi's route table mounts and
// guards. Each reads its input into the meterpoints use case's and answers what it answers: the
// refusals of a value the register cannot take (a postcode that is not a UK one, a bad check digit,
// an address without a postcode) are prod's ErrorWithDetail sentences, a missing or mistyped field
// the usual validation record. It is part of the REST door, in a package of its own so that each
// package stays one a reader can hold (test/architecture's TestPackageSize).
package meterroutes

import (
	"net/http"

	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/web"
)

type fields = web.Fields

// Handlers are the group's handlers, on the register's use cases.
type Handlers struct{ Meters *meterpoints.Service }

// The bodies of the POST routes hold one short string each: anything much longer is not a
// lookup, and is refused before it is read whole (413).
const (
	maxMeterByMPANBody    = 4 << 10
	maxMeterByAddressBody = 2 << 10
)

// PairPattern serves GET /meter/by-ref/{meter_ref} and the deprecated GET
// /meter/{meter_ref}/mpan: Go's ServeMux refuses the two side by side (both match
// /meter/by-ref/mpan), so they share this one (web.Route.Pattern), as the asset pairs do.
const PairPattern = "/meter/{meter_first}/{meter_second}"

// ByAddressPattern is GET /meter/ alone: "/meter/" by itself is a subtree pattern,
// which would take every path under /meter/ that no other route serves.
const ByAddressPattern = "/meter/{$}"

// PairHandler tells the paths of PairPattern apart: the literal by-ref segment wins (a
// reference is never "by-ref"); otherwise a last segment "mpan" is the deprecated form.
// Anything else under the pattern is notFound's (the API's 404). The request's Pattern is set
// to the documented path, which the access log and the metrics name.
func PairHandler(byRef, notFound http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		first, second := r.PathValue("meter_first"), r.PathValue("meter_second")
		switch {
		case first == "by-ref":
			r.SetPathValue("meter_ref", second)
			r.Pattern = "GET /meter/by-ref/{meter_ref}"
		case second == "mpan":
			r.SetPathValue("meter_ref", first)
			r.Pattern = "GET /meter/{meter_ref}/mpan"
		default:
			notFound.ServeHTTP(w, r)
			return
		}
		byRef.ServeHTTP(w, r)
	})
}

// DocumentedAs names a route by its documented path rather than its mux pattern (GET
// /meter/ is mounted as /meter/{$}), for the access log and the metrics.
func DocumentedAs(pattern string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Pattern = pattern
		h.ServeHTTP(w, r)
	})
}

// requiredQuery is a query parameter the route needs: absent, it is the validation record's
// "Field required" (an empty value is present, and judged by the use case).
func requiredQuery(f *fields, r *http.Request, name string) string {
	q := r.URL.Query()
	if !q.Has(name) {
		f.Add("Field required", "missing", []any{"query", name})
		return ""
	}
	return q.Get(name)
}

// readSmallBody reads a JSON body of at most limit bytes (413 beyond) into the fields parse
// reads, answering its problems as every body's are.
func readSmallBody(r *http.Request, limit int64, parse func(f *fields, body map[string]any)) error {
	body, err := web.DecodeJSONUpTo(r, limit)
	if err != nil {
		return err
	}
	f := &fields{}
	parse(f, body)
	return f.Err()
}

// Search is GET /meter/search: the meter points at a postcode, as references.
func (h Handlers) Search(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	postcode := requiredQuery(f, r, "postcode")
	if err := f.Err(); err != nil {
		return nil, err
	}
	return h.Meters.Search(r.Context(), p, postcode, r.URL.Query().Get("building_identifier"))
}

// ByRef is GET /meter/by-ref/{meter_ref} and the deprecated GET /meter/{meter_ref}/mpan.
func (h Handlers) ByRef(r *http.Request, p *auth.Principal) (any, error) {
	return h.Meters.ByRef(r.Context(), p, r.PathValue("meter_ref"))
}

// ByMPAN is POST /meter/by-mpan.
func (h Handlers) ByMPAN(r *http.Request, p *auth.Principal) (any, error) {
	var mpan string
	err := readSmallBody(r, maxMeterByMPANBody, func(f *fields, body map[string]any) {
		mpan, _ = f.Str(body, []any{"body"}, "mpan", true)
	})
	if err != nil {
		return nil, err
	}
	return h.Meters.ByMPAN(r.Context(), p, mpan)
}

// ByMPANPath is the deprecated GET /meter/{mpan}.
func (h Handlers) ByMPANPath(r *http.Request, p *auth.Principal) (any, error) {
	return h.Meters.ByMPAN(r.Context(), p, r.PathValue("mpan"))
}

// ByAddress is POST /meter/by-address.
func (h Handlers) ByAddress(r *http.Request, p *auth.Principal) (any, error) {
	var address string
	err := readSmallBody(r, maxMeterByAddressBody, func(f *fields, body map[string]any) {
		address, _ = f.Str(body, []any{"body"}, "address", true)
	})
	if err != nil {
		return nil, err
	}
	return h.Meters.ByAddress(r.Context(), p, address)
}

// ByAddressQuery is the deprecated GET /meter/?address=.
func (h Handlers) ByAddressQuery(r *http.Request, p *auth.Principal) (any, error) {
	f := &fields{}
	address := requiredQuery(f, r, "address")
	if err := f.Err(); err != nil {
		return nil, err
	}
	return h.Meters.ByAddress(r.Context(), p, address)
}
