package server_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/restapi"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/internal/web"
)

// The API-server requests the manager makes on behalf of REST requests are counted: a REST
// request that carries countHeader has its context tagged with the header's value, which the
// manager's transport (countAPICalls) finds on every API-server request made with it.
const countHeader = "X-Test-Count-Api-Calls"

type countTag struct{}

var apiCalls sync.Map // tag, and tag + " " + verb -> *atomic.Int64

func apiCallsOf(tag string) int64 {
	n, _ := apiCalls.LoadOrStore(tag, new(atomic.Int64))
	return n.(*atomic.Int64).Load()
}

// apiCallsOfVerb counts the tag's API-server requests of one verb (apiVerb: "list", "get",
// "watch", "create", ...).
func apiCallsOfVerb(tag, verb string) int64 { return apiCallsOf(tag + " " + verb) }

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func countAPICalls(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		recordWrite(r) // writes_test.go
		if tag, ok := r.Context().Value(countTag{}).(string); ok {
			for _, key := range []string{tag, tag + " " + testenv.APIVerb(r)} {
				n, _ := apiCalls.LoadOrStore(key, new(atomic.Int64))
				n.(*atomic.Int64).Add(1)
			}
		}
		return next.RoundTrip(r)
	})
}

func tagAPICalls(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tag := r.Header.Get(countHeader); tag != "" {
			r = r.WithContext(context.WithValue(r.Context(), countTag{}, tag))
		}
		h.ServeHTTP(w, r)
	})
}

// postBody posts body as it is (with its Content-Encoding, when given) to path and answers the
// status and body.
func postBody(path, token string, body []byte, headers map[string]string) (int, string) {
	GinkgoHelper()
	status, out := sendRaw(http.MethodPost, path, token, body, headers)
	return status, string(out)
}

var _ = Describe("Bounded work per request (hostile inputs)", func() {
	It("answers 2.7 million empty readings, 8 KB gzip'd, 413 found while streaming, and lists the problems of 100 rejected readings at most", func() {
		needDatabase()
		tok := newOrg(context.Background()).token()
		bomb := []byte(`{"readings":[` + strings.TrimSuffix(strings.Repeat("{},", 2_700_000), ",") + `]}`)
		Expect(len(bomb)).To(BeNumerically("<", restapi.MaxReadingsBodyBytes))
		small := gzipped(bomb)
		Expect(len(small)).To(BeNumerically("<", 10<<10))
		status, body := postBody("/data/readings", tok, small, map[string]string{"Content-Encoding": "gzip"})
		Expect(status).To(Equal(http.StatusRequestEntityTooLarge), body)
		Expect(body).To(ContainSubstring(`"detail":"More than 10000 readings in one request`))

		// 150 empty readings: a 422 naming the five missing fields of the first 100, and
		// counting the other 50.
		status, body = postBody("/data/readings", tok,
			[]byte(`{"readings":[`+strings.TrimSuffix(strings.Repeat("{},", 150), ",")+`]}`), nil)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), body)
		detail := response(body).Detail().([]any)
		Expect(detail).To(HaveLen(5*restapi.MaxListedRejections + 1))
		Expect(detail[len(detail)-1]).To(Equal(map[string]any{"loc": []any{"body", "readings"},
			"msg": "50 more rejected readings, not listed", "type": "too_many_errors"}))
	})

	It("refuses a list longer than its maximum while decoding, in the 422 form", func() {
		tok := newOrg(context.Background()).token()
		assets := strings.TrimSuffix(strings.Repeat(`{},`, 300_000), ",")
		status, body := postBody("/entities/site/onboard", tok, []byte(`{"site": {}, "assets": [`+assets+`]}`), nil)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), body)
		Expect(response(body).Detail()).To(Equal([]any{map[string]any{"loc": []any{"body", "assets"},
			"msg": fmt.Sprintf("List should have at most %d items", web.MaxListItems), "type": "too_long"}}))
	})

	It("answers a flex event naming 1,000 unknown sites from the cache, at a constant cost in API-server requests", func() {
		tok := newOrg(context.Background(), flexv1.RoleEntityRead, flexv1.RoleFlexEventsWrite).token()
		ids := make([]any, 1000)
		for i := range ids {
			ids[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
		}
		tag := "flex-events-unknown-sites"
		status, data, err := testenv.CallWithHeaders(apiServer.URL, "POST", "/flex-events", tok, map[string]any{"proposition": "limited_pause",
			"start_at": "2030-01-07T17:00:00Z", "end_at": "2030-01-07T18:00:00Z", "direction": "turn_down",
			"rate_pence_per_kwh": 10, "site_ids": ids}, map[string]string{countHeader: tag})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", data)
		// The first 100 named, the other 900 counted.
		detail := response(data).Detail().([]any)
		Expect(detail).To(HaveLen(101))
		Expect(detail[99]).To(HaveKeyWithValue("loc", []any{"body", "site_ids", 99.0}))
		Expect(detail[100]).To(Equal(map[string]any{"loc": []any{"body", "site_ids"},
			"msg": "900 more unknown sites, not listed", "type": "too_many_errors"}))
		// The proposition is looked up (the cache first): nothing per site.
		Expect(apiCallsOf(tag)).To(BeNumerically("<=", 2))
	})

	It("answers 200 callbacks with unknown states from the cache (at most 1 API-server request in all), and limits failed callbacks per address", func() {
		tag := "callbacks-unknown-states"
		for i := range 200 {
			req, err := http.NewRequest(http.MethodGet,
				fmt.Sprintf("%s/oauth/callback?code=x&state=unknown-state-%03d-unknown-state-unknown", apiServer.URL, i), nil)
			Expect(err).NotTo(HaveOccurred())
			req.Header.Set(countHeader, tag)
			resp, err := http.DefaultClient.Do(req)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusBadRequest))
		}
		Expect(apiCallsOf(tag)).To(BeNumerically("<=", 1))

		// The same server with the manager's limits: past the failures' burst, 429.
		cfg := apiSrv.Config
		cfg.Limits = web.Limits{CallbackFailuresPerAddress: web.Limit{Rate: 0.01, Burst: 5}}
		limited := httptest.NewServer(server.NewServer(cfg))
		defer limited.Close()
		statuses := make([]int, 0, 7)
		var retryAfter string
		for i := range 7 {
			resp, err := http.Get(fmt.Sprintf("%s/oauth/callback?code=x&state=guess-%d-guess-guess-guess-guess", limited.URL, i))
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			statuses = append(statuses, resp.StatusCode)
			retryAfter = resp.Header.Get("Retry-After")
		}
		Expect(statuses).To(Equal([]int{400, 400, 400, 400, 400, 429, 429}))
		Expect(retryAfter).To(Equal("100"))
	})
})
