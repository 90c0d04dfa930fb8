package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/web"
)

// limitedCall sends a request to another REST API instance (same cache and cluster) that has
// its own limits. headers are name, value pairs.
func limitedCall(srv *httptest.Server, method, path, token, contentType, body string, headers ...string) *http.Response {
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	Expect(err).NotTo(HaveOccurred())
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(resp.Body.Close)
	return resp
}

var _ = Describe("Input limits", func() {
	limited := func(l server.Limits) *httptest.Server {
		cfg := apiSrv.Config
		cfg.Limits = l
		srv := httptest.NewServer(server.NewServer(cfg))
		DeferCleanup(srv.Close)
		return srv
	}

	It("answers a flood from one API client with 429 and Retry-After, leaving other clients alone", func(ctx SpecContext) {
		srv := limited(server.Limits{PerClient: web.Limit{Rate: 0.01, Burst: 3}})
		flooding, other := newOrg(ctx).token(), newOrg(ctx).token()
		for range 3 {
			Expect(limitedCall(srv, "GET", "/auth/users/me/", flooding, "", "").StatusCode).To(Equal(http.StatusOK))
		}
		resp := limitedCall(srv, "GET", "/auth/users/me/", flooding, "", "")
		Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests))
		Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(limitedCall(srv, "GET", "/auth/users/me/", other, "", "").StatusCode).To(Equal(http.StatusOK))
	})

	It("stops checking passwords for a username after repeated failures", func(ctx SpecContext) {
		srv := limited(server.Limits{LoginFailuresPerUsername: web.Limit{Rate: 0.001, Burst: 3}})
		o := newOrg(ctx)
		o.token() // the client is in the cache
		form := func(password string) string {
			return fmt.Sprintf("username=%s&password=%s&grant_type=password", o.Username, password)
		}
		for range 3 {
			Expect(limitedCall(srv, "POST", "/auth/token-form", "", "application/x-www-form-urlencoded", form("guess")).StatusCode).
				To(Equal(http.StatusUnauthorized))
		}
		resp := limitedCall(srv, "POST", "/auth/token-form", "", "application/x-www-form-urlencoded", form(o.Password))
		Expect(resp.StatusCode).To(Equal(http.StatusTooManyRequests), "even the right password waits")
		Expect(resp.Header.Get("Retry-After")).To(Equal("1000"))
	})

	It("answers a flood of bad tokens from one address with 429", func() {
		srv := limited(server.Limits{AuthFailuresPerAddress: web.Limit{Rate: 0.01, Burst: 5}})
		for range 5 {
			Expect(limitedCall(srv, "GET", "/entities/site", "not-a-token", "", "").StatusCode).To(Equal(http.StatusUnauthorized))
		}
		Expect(limitedCall(srv, "GET", "/entities/site", "not-a-token", "", "").StatusCode).To(Equal(http.StatusTooManyRequests))
	})

	It("never refuses a valid token for others' bad tokens from the same address", func(ctx SpecContext) {
		srv := limited(server.Limits{AuthFailuresPerAddress: web.Limit{Rate: 0.01, Burst: 5}})
		good := newOrg(ctx).token()
		for range 10 {
			limitedCall(srv, "GET", "/entities/site", "not-a-token", "", "")
		}
		Expect(limitedCall(srv, "GET", "/entities/site", "not-a-token", "", "").StatusCode).To(Equal(http.StatusTooManyRequests))
		for range 5 {
			Expect(limitedCall(srv, "GET", "/entities/site", good, "", "").StatusCode).To(Equal(http.StatusOK))
		}
	})

	It("takes the client's address from X-Forwarded-For only behind a trusted proxy", func(ctx SpecContext) {
		flood := func(srv *httptest.Server, from string) {
			for range 6 {
				limitedCall(srv, "GET", "/entities/site", "not-a-token", "", "", "X-Forwarded-For", from)
			}
		}
		limits := server.Limits{AuthFailuresPerAddress: web.Limit{Rate: 0.01, Burst: 5}}
		cfg := apiSrv.Config
		cfg.Limits = limits
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		behindProxy := httptest.NewServer(server.NewServer(cfg))
		DeferCleanup(behindProxy.Close)

		flood(behindProxy, "203.0.113.7")
		Expect(limitedCall(behindProxy, "GET", "/entities/site", "not-a-token", "", "", "X-Forwarded-For", "203.0.113.7").StatusCode).
			To(Equal(http.StatusTooManyRequests), "the flooding client is limited")
		Expect(limitedCall(behindProxy, "GET", "/entities/site", "not-a-token", "", "", "Forwarded", `for="198.51.100.9:4711"`).StatusCode).
			To(Equal(http.StatusUnauthorized), "another client behind the same proxy is not")

		direct := limited(limits)
		flood(direct, "203.0.113.7")
		Expect(limitedCall(direct, "GET", "/entities/site", "not-a-token", "", "", "X-Forwarded-For", "198.51.100.9").StatusCode).
			To(Equal(http.StatusTooManyRequests), "without trust, the header is the caller's word and is ignored")
	})

	It("keeps a username's failure budget per address, so nobody elsewhere can lock an organisation out", func(ctx SpecContext) {
		cfg := apiSrv.Config
		cfg.Limits = server.Limits{LoginFailuresPerUsername: web.Limit{Rate: 0.001, Burst: 3}}
		cfg.TrustedProxies = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
		srv := httptest.NewServer(server.NewServer(cfg))
		DeferCleanup(srv.Close)
		o := newOrg(ctx)
		o.token()
		form := func(password string) string {
			return fmt.Sprintf("username=%s&password=%s&grant_type=password", o.Username, password)
		}
		for range 4 {
			limitedCall(srv, "POST", "/auth/token-form", "", "application/x-www-form-urlencoded", form("guess"), "X-Forwarded-For", "203.0.113.7")
		}
		Expect(limitedCall(srv, "POST", "/auth/token-form", "", "application/x-www-form-urlencoded", form(o.Password),
			"X-Forwarded-For", "198.51.100.9").StatusCode).To(Equal(http.StatusOK))
	})

	It("refuses a body over 1 MiB with 413", func(ctx SpecContext) {
		tok := newOrg(ctx).token()
		big := `{"site":{"mpan":"1200000000011","postcode":"SW1A 1AA","street_address":"` + strings.Repeat("x", 2<<20) + `"}}`
		status, resp := call("POST", "/entities/site/onboard", tok, raw(big))
		Expect(status).To(Equal(http.StatusRequestEntityTooLarge), "%s", resp)
	})

	It("refuses more assets than one call may carry", func(ctx SpecContext) {
		tok := newOrg(ctx).token()
		body := household("1200000000011", func(b map[string]any) {
			assets := make([]any, app.MaxAssetsPerCall+1)
			for i := range assets {
				assets[i] = map[string]any{"external_id": fmt.Sprintf("a-%d", i), "type": "battery"}
			}
			b["assets"] = assets
		})
		status, resp := call("POST", "/entities/site/onboard", tok, body)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.String()).To(ContainSubstring(`"too_long"`))
	})
})
