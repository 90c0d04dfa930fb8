package server_test

import (
	"io"
	"net/http"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/testenv"
)

var _ = Describe("The hosted flow's page (GET /hosted/flow)", func() {
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(apiServer.URL + path)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		body, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		return resp, string(body)
	}

	It("is served without a token, with its strict policy, no referrer, and its theme validated", func() {
		resp, body := get("/hosted/flow?primary=%23005A30&background=javascript:alert(1)")
		Expect(resp.StatusCode).To(Equal(http.StatusOK))
		Expect(resp.Header.Get("Content-Type")).To(Equal("text/html; charset=utf-8"))
		Expect(resp.Header.Get("Referrer-Policy")).To(Equal("no-referrer"))
		Expect(resp.Header.Get("Cache-Control")).To(Equal("no-store"))
		csp := resp.Header.Get("Content-Security-Policy")
		Expect(csp).To(ContainSubstring("frame-ancestors *"))
		Expect(csp).To(ContainSubstring("script-src 'self';"))
		Expect(csp).NotTo(ContainSubstring("unsafe-inline"))
		Expect(body).To(ContainSubstring("--primary:#005a30"))
		Expect(body).To(ContainSubstring("--background:" + hostedflow.DefaultTheme.Background))
		Expect(body).NotTo(ContainSubstring("javascript"))
		for _, asset := range []string{"/hosted/flow.js", "/hosted/flow.css"} {
			resp, body := get(asset)
			Expect(resp.StatusCode).To(Equal(http.StatusOK), asset)
			Expect(resp.Header.Get("X-Content-Type-Options")).To(Equal("nosniff"))
			Expect(body).To(Equal(string(hostedflow.Assets[strings.TrimPrefix(asset, "/hosted/")].Body)))
		}
	})

	It("answers its JSON routes only for a component token handed over by its allowed origin", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		user := mustCall("POST", "/auth/component-token", tok, componentForm("hosted-page-user",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userTok := user["access_token"].(string)
		hostedGet := func(token, origin string) (int, response) {
			status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/household", token, nil,
				map[string]string{hostedflow.EmbedderOriginHeader: origin})
			Expect(err).NotTo(HaveOccurred())
			return status, data
		}
		status, body := hostedGet(userTok, "https://app.example.com")
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(body.Map()).To(HaveKeyWithValue("site_id", user["id"]))
		Expect(body.Map()).To(HaveKeyWithValue("start_step", "address"))

		By("its eligibility says, in words, that the home's details are missing")
		status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/eligibility", userTok, nil,
			map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		elig := response(data).Map()
		Expect(elig["eligible"]).To(BeEmpty())
		Expect(elig["reasons"]).To(Equal([]any{map[string]any{"asset": "Your home", "proposition": "every programme",
			"sentences": []any{hostedflow.Explain("site_details_missing")}}}))

		status, body = hostedGet(userTok, "https://evil.example.com")
		Expect(status).To(Equal(http.StatusForbidden))
		Expect(body.Detail()).To(Equal("This token was not handed over by its allowed origin"))
		status, _ = hostedGet(userTok, "")
		Expect(status).To(Equal(http.StatusForbidden))
		status, body = hostedGet(tok, "https://app.example.com")
		Expect(status).To(Equal(http.StatusForbidden))
		Expect(body.Detail()).To(ContainSubstring("component"))
		status, _ = hostedGet("", "https://app.example.com")
		Expect(status).To(Equal(http.StatusUnauthorized))

		By("granting no CORS: only the flow's own page, on the flow's own origin, calls these routes")
		req, err := http.NewRequest(http.MethodOptions, apiServer.URL+"/hosted/api/household", nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Origin", "https://app.example.com")
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization")
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		Expect(resp.Header.Get("Access-Control-Allow-Origin")).To(BeEmpty())
	})

	It("validates the address step as the REST API does, and stores nothing until it is valid", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		user := mustCall("POST", "/auth/component-token", tok, componentForm("hosted-address-user",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		before := snapshot(Default, ctx, o.Namespace)
		status, data, err := testenv.CallWithHeaders(apiServer.URL, "PUT", "/hosted/api/address", user["access_token"].(string),
			map[string]any{"postcode": "not a postcode", "mpan": "1200000000012", "street_address": "1 Road"},
			map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", data)
		locs := make([]any, 0, 2)
		for _, item := range response(data).Detail().([]any) {
			locs = append(locs, item.(map[string]any)["loc"])
		}
		Expect(locs).To(ConsistOf([]any{"body", "mpan"}, []any{"body", "postcode"}))
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})
})
