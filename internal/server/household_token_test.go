package server_test

import (
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	hh "github.com/flexsite/flexsite/internal/household"
)

// request sends one request with extra headers and returns the answer's status and headers.
func request(method, path, token string, headers map[string]string) (int, http.Header) {
	GinkgoHelper()
	req, err := http.NewRequest(method, apiServer.URL+path, nil)
	Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.Body.Close()).To(Succeed())
	return resp.StatusCode, resp.Header
}

var _ = Describe("The component token's household", func() {
	const origin = "https://app.example.com"
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("answers the household's site id, carries allowed_origin and records it on the Site", func(ctx SpecContext) {
		user := mustCall("POST", "/auth/component-token", tok, componentForm("household-1",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z", "allowed_origin", "HTTPS://App.Example.com:443"))
		site := userSite(ctx, o.Namespace, "household-1")
		Expect(user["id"]).To(Equal(site.Labels[flexv1.IDLabel]))
		claims, _ := unverifiedClaims(user["access_token"].(string))
		Expect(claims["aor"]).To(Equal(origin), "the origin as a browser spells it")
		Expect(hh.AllowedOrigins(site)).To(Equal([]string{origin}))
		Expect(site.Spec.MPAN).To(BeEmpty())

		// The organisation uses the id in its later requests.
		Expect(mustCall("GET", "/entities/site/"+user["id"].(string), tok, nil)["id"]).To(Equal(user["id"]))

		// A second origin is added; the first stays granted.
		again := mustCall("POST", "/auth/component-token", tok, componentForm("household-1",
			"allowed_origin", "http://localhost:3000"))
		Expect(again["id"]).To(Equal(user["id"]))
		Expect(hh.AllowedOrigins(userSite(ctx, o.Namespace, "household-1"))).
			To(Equal([]string{origin, "http://localhost:3000"}))
	})

	It("lists no propositions until the household has an MPAN, then the organisation fills the same site", func(ctx SpecContext) {
		user := mustCall("POST", "/auth/component-token", tok, componentForm("household-2",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		id, userTok := user["id"].(string), user["access_token"].(string)
		elig := mustCall("GET", "/entities/site/"+id+"/eligibility", userTok, nil)
		Expect(elig["eligible_propositions"]).To(BeEmpty())
		Expect(elig["site_issues"]).To(Equal([]any{"site_details_missing"}))
		status, resp := call("POST", "/entities/site/"+id+"/enrol", userTok, map[string]any{"proposition": "limited_pause"})
		Expect(status).To(BeNumerically(">=", 400), "%s", resp)
		Expect(status).To(BeNumerically("<", 500), "%s", resp)

		// The organisation onboards the same user: the household gets the MPAN, no second site.
		body := household("2301234567894")
		body["site"].(map[string]any)["external_user_id"] = "household-2"
		onboarded := mustCall("POST", "/entities/site/onboard", tok, body)
		Expect(onboarded["site"].(map[string]any)["site_id"]).To(Equal(id))
		Expect(sitesIn(ctx, o.Namespace)).To(HaveLen(1))
		site := userSite(ctx, o.Namespace, "household-2")
		Expect(site.Spec.MPAN).To(Equal("2301234567894"))
		Expect(site.Spec.Postcode).To(Equal("SW1A 1AA"))
		Eventually(func(g Gomega) map[string]any {
			return mustCallG(g, "GET", "/entities/site/"+id+"/eligibility", userTok, nil)
		}).ShouldNot(HaveKey("site_issues"), "left out once there are none")

		// Onboarding the MPAN again names the same site; another user with it is a conflict.
		Expect(mustCall("POST", "/entities/site/onboard", tok, household("2301234567894"))["site"].(map[string]any)["site_id"]).
			To(Equal(id))
		other := household("2301234567894")
		other["site"].(map[string]any)["external_user_id"] = "someone-else"
		status, resp = call("POST", "/entities/site/onboard", tok, other)
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		// And the household cannot take a second MPAN through an upsert.
		second := household("1234567890126")
		second["site"].(map[string]any)["external_user_id"] = "household-2"
		status, resp = call("POST", "/entities/site/initialise", tok, second)
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(sitesIn(ctx, o.Namespace)).To(HaveLen(1))
	})

	It("answers CORS for exactly the token's origin on the routes an end-user token may call", func(ctx SpecContext) {
		user := mustCall("POST", "/auth/component-token", tok, componentForm("household-3",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		id, userTok := user["id"].(string), user["access_token"].(string)
		path := "/entities/site/" + id + "/eligibility"

		preflight := func(p, from, method string) http.Header {
			GinkgoHelper()
			status, h := request("OPTIONS", p, "", map[string]string{"Origin": from,
				"Access-Control-Request-Method": method, "Access-Control-Request-Headers": "authorization, content-type"})
			Expect(status).To(Equal(http.StatusNoContent))
			Expect(h.Values("Vary")).To(ContainElement("Origin"))
			return h
		}
		h := preflight(path, origin, "GET")
		Expect(h.Get("Access-Control-Allow-Origin")).To(Equal(origin))
		Expect(h.Get("Access-Control-Allow-Methods")).To(Equal("GET"))
		Expect(strings.ToLower(h.Get("Access-Control-Allow-Headers"))).To(Equal("authorization, content-type"))
		h = preflight("/entities/site/"+id, origin, "PATCH")
		Expect(h.Get("Access-Control-Allow-Origin")).To(Equal(origin))
		Expect(h.Get("Access-Control-Allow-Methods")).To(Equal("GET, PATCH"))

		for _, refused := range []struct{ path, origin, method string }{
			{path, "https://evil.example", "GET"},
			{path, "https://app.example.com.evil.example", "GET"},
			{path, "null", "GET"},
			{path, origin, "DELETE"},
			{"/entities/site/" + onboardedSite(tok, "1234567890126") + "/eligibility", origin, "GET"},
			{"/entities/site/00000000-0000-4000-8000-000000000000/eligibility", origin, "GET"},
		} {
			h := preflight(refused.path, refused.origin, refused.method)
			Expect(h.Get("Access-Control-Allow-Origin")).To(BeEmpty(), "%+v", refused)
		}
		// Organisation-only routes have no preflight grant at all.
		status, h := request("OPTIONS", "/rewards/"+id+"/transactions", "", map[string]string{"Origin": origin,
			"Access-Control-Request-Method": "GET"})
		Expect(status).NotTo(Equal(http.StatusNoContent))
		Expect(h.Get("Access-Control-Allow-Origin")).To(BeEmpty())

		// Actual requests: granted only when the verified token names the request's origin.
		status, h = request("GET", path, userTok, map[string]string{"Origin": origin})
		Expect(status).To(Equal(http.StatusOK))
		Expect(h.Get("Access-Control-Allow-Origin")).To(Equal(origin))
		Expect(h.Values("Vary")).To(ContainElement("Origin"))
		status, h = request("GET", path, userTok, map[string]string{"Origin": "https://evil.example"})
		Expect(status).To(Equal(http.StatusOK))
		Expect(h.Get("Access-Control-Allow-Origin")).To(BeEmpty())
		status, h = request("GET", path, tok, map[string]string{"Origin": origin})
		Expect(status).To(Equal(http.StatusOK))
		Expect(h.Get("Access-Control-Allow-Origin")).To(BeEmpty(), "an organisation token is never granted CORS")
		status, h = request("GET", "/entities/site/"+id, "", map[string]string{"Origin": origin})
		Expect(status).To(Equal(http.StatusUnauthorized))
		Expect(h.Get("Access-Control-Allow-Origin")).To(BeEmpty())
	})
})
