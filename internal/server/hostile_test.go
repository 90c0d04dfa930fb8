package server_test

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/testenv"
)

// Hostile input (issue 27): what a hostile client tried, through every door that takes it.
// Each is refused with the documented 4xx and stores nothing.
var _ = Describe("Hostile input", func() {
	var (
		o       org
		tok     string
		userTok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
		user := mustCall("POST", "/auth/component-token", tok, componentForm("hostile-user",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userTok = user["access_token"].(string)
	})
	hosted := func(method, path string, body any) (int, response) {
		GinkgoHelper()
		status, data, err := testenv.CallWithHeaders(apiServer.URL, method, path, userTok, body,
			map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
		Expect(err).NotTo(HaveOccurred())
		return status, data
	}

	It("refuses a non-finite power typed into the hosted flow as the REST API does: a 4xx, never a 500", func(ctx SpecContext) {
		before := snapshot(Default, ctx, o.Namespace)
		for _, text := range []string{"NaN", "nan", "Inf", "+Inf", "-Inf", "Infinity", "infinity", "1e309", "7,4", "0x1p3"} {
			status, data := hosted("POST", "/hosted/api/assets", map[string]any{"type": "charger", "power_kw": text})
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", text, data)
			item := data.Detail().([]any)[0].(map[string]any)
			Expect(item["loc"]).To(Equal([]any{"body", "power_kw"}), text)
			Expect(item["type"]).To(BeElementOf("float_type", "finite_number"), text)
		}
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		status, data := hosted("POST", "/hosted/api/assets", map[string]any{"type": "charger", "power_kw": " 7.4 "})
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()["properties"].(map[string]any)["power_kw"]).To(BeEquivalentTo(7.4))
	})

	It("refuses control characters in every text field, through every door", func(ctx SpecContext) {
		before := snapshot(Default, ctx, o.Namespace)
		dirty := "1 Test\u0000\u0007\u001b[31mStreet"
		status, resp := call("POST", "/entities/site/onboard", tok, household("1200000000011", func(b map[string]any) {
			b["site"].(map[string]any)["street_address"] = dirty
		}))
		expectValidationItem(status, resp, []any{"body", "site", "street_address"}, "value_error")
		status, resp = call("POST", "/entities/site/initialise", tok, household("1200000000011", func(b map[string]any) {
			b["assets"].([]any)[0].(map[string]any)["external_id"] = "ev\u0085charger"
		}))
		expectValidationItem(status, resp, []any{"body", "assets", float64(0), "external_id"}, "value_error")
		status, resp = call("POST", "/auth/component-token", tok, componentForm("cu\x00x",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		expectValidationItem(status, resp, []any{"body", "external_user_id"}, "value_error")
		status, data := hosted("PUT", "/hosted/api/address", map[string]any{"postcode": "SW1A 1AA", "mpan": "1200000000011",
			"street_address": "1 Road\u2028Elsewhere"})
		expectValidationItem(status, data, []any{"body", "street_address"}, "value_error")
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

		siteID := mustCall("POST", "/entities/site/onboard", tok, household("1200000000011"))["site"].(map[string]any)["site_id"].(string)
		status, resp = call("PATCH", "/entities/site/"+siteID, tok, map[string]any{"address": "line one\nline two"})
		expectValidationItem(status, resp, []any{"body", "address"}, "value_error")
		Expect(mustCall("GET", "/entities/site/"+siteID, tok, nil)["address"]).To(Equal("10 Downing Street"))
	})

	It("takes as allowed_origin only an origin with a valid host, as the browser spells it", func(ctx SpecContext) {
		before := snapshot(Default, ctx, o.Namespace)
		for _, origin := range []string{"https://example.com;script-src", "https://a,b", "https://a'b.example",
			"https://[fe80::1%25eth0]", "https://app.example.com/path"} {
			status, resp := call("POST", "/auth/component-token", tok, form{"external_user_id": "origin-user",
				"allowed_origin": origin, "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"})
			expectValidationItem(status, resp, []any{"body", "allowed_origin"}, "url_parsing")
		}
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		user := mustCall("POST", "/auth/component-token", tok, form{"external_user_id": "origin-user",
			"allowed_origin": "HTTPS://App.Example.COM:443/", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"})
		status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/household", user["access_token"].(string), nil,
			map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(response(data).Map()["allowed_origin"]).To(Equal("https://app.example.com"))
	})

	It("refuses a boundary meter consent given in the future, through every door that takes one", func(ctx SpecContext) {
		before := snapshot(Default, ctx, o.Namespace)
		const future = "9999-12-31T23:59:59Z"
		status, resp := call("POST", "/entities/site/onboard", tok, household("1200000000011", func(b map[string]any) {
			b["site"].(map[string]any)["gave_boundary_meter_consent_at"] = future
		}))
		expectValidationItem(status, resp, []any{"body", "site", "gave_boundary_meter_consent_at"}, "value_error")
		status, resp = call("POST", "/auth/component-token", tok, componentForm("future-user",
			"gave_boundary_meter_consent_at", future))
		expectValidationItem(status, resp, []any{"body", "gave_boundary_meter_consent_at"}, "value_error")
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

		siteID := mustCall("POST", "/entities/site/initialise", tok, household("1200000000011", func(b map[string]any) {
			delete(b["site"].(map[string]any), "gave_boundary_meter_consent_at")
		}))["site"].(map[string]any)["site_id"].(string)
		for _, path := range []string{"/entities/site/" + siteID + "/meter-consent", "/entities/site/" + siteID + "/enrol"} {
			status, resp := call("POST", path, tok, map[string]any{"gave_boundary_meter_consent_at": future, "proposition": "limited_pause"})
			expectValidationItem(status, resp, []any{"body", "gave_boundary_meter_consent_at"}, "value_error")
		}
		Expect(mustCall("GET", "/entities/site/"+siteID, tok, nil)).NotTo(HaveKey("gave_boundary_meter_consent_at"))
	})
})
