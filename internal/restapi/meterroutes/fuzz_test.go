package meterroutes_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app/meterpoints"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/restapi/meterroutes"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// unreachableRegister fails every lookup with webtest.ErrStoreReached, as webtest's
// UnreachableStore does every read: reaching it means a request passed every check the
// handler makes before it looks anything up.
type unreachableRegister struct{}

func (unreachableRegister) AtPostcode(context.Context, string, int) ([]meters.Point, error) {
	return nil, webtest.ErrStoreReached
}

func (unreachableRegister) ByMPAN(context.Context, string) (meters.Point, bool, error) {
	return meters.Point{}, false, webtest.ErrStoreReached
}

func (unreachableRegister) Ranked(context.Context, string, string, int) ([]meters.Candidate, error) {
	return nil, webtest.ErrStoreReached
}

func (unreachableRegister) Loaded(context.Context) (bool, error) {
	return false, webtest.ErrStoreReached
}

var fuzzPrincipal = &auth.Principal{Kind: auth.KindOrganisation, Namespace: "org-fuzz"}

// Whatever body or query a client sends, the Meters group answers a well-formed 4xx or looks
// the register up: never a 500, never a panic.
func FuzzMeterRequests(f *testing.F) {
	for _, seed := range []string{`{"mpan": "1200123456787"}`, `{"mpan": "1200 1234 5678 7"}`, `{"mpan": 1}`, `{}`, `[]`,
		`{"address": "The Old Barn, Meter Lane, TN1 1AB"}`, `{"address": "%_'\\"}`, `{"address": "a\u0000b TN1 1AB"}`,
		`not json`, "", "tn11ab", "SW1A 1AA' OR '1'='1", "%", `\`} {
		f.Add(uint8(0), []byte(seed))
	}
	h := meterroutes.Handlers{Meters: &meterpoints.Service{Log: logr.Discard(), Register: unreachableRegister{}}}
	f.Fuzz(func(t *testing.T, route uint8, input []byte) {
		var (
			err   error
			roots = []string{"body"}
		)
		switch route % 5 {
		case 0:
			_, err = h.ByMPAN(webtest.JSONRequest(input), fuzzPrincipal)
		case 1:
			_, err = h.ByAddress(webtest.JSONRequest(input), fuzzPrincipal)
		case 2:
			r := httptest.NewRequest(http.MethodGet, "/meter/search?"+url.Values{"postcode": {string(input)},
				"building_identifier": {string(input)}}.Encode(), nil)
			_, err = h.Search(r, fuzzPrincipal)
			roots = []string{"query"}
		case 3:
			r := httptest.NewRequest(http.MethodGet, "/meter/?"+url.Values{"address": {string(input)}}.Encode(), nil)
			_, err = h.ByAddressQuery(r, fuzzPrincipal)
			roots = []string{"query"}
		case 4:
			r := httptest.NewRequest(http.MethodGet, "/meter/x", nil)
			r.SetPathValue("mpan", string(input))
			_, err = h.ByMPANPath(r, fuzzPrincipal)
		}
		webtest.CheckAnswer(t, err, roots...)
	})
}
