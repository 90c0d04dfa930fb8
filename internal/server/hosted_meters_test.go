package server_test

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
)

// hostedMetersPostcode is where this file's register has its meter points (an anchor of
// synth's, so that a search there finds a dozen or so).
const hostedMetersPostcode = "EC1A 1BB"

var _ = Describe("The hosted flow's Find my meter (GET /hosted/api/meters, PUT /hosted/api/address with meter_ref)", func() {
	var (
		points []meters.Point // the register's meter points at hostedMetersPostcode, in the search's order
		hosted func(method, path, token string, body any) (int, response)
		user   func(o org, externalID string) (siteID, token string)
	)
	BeforeEach(func(ctx SpecContext) {
		needDatabase()
		var file bytes.Buffer
		Expect(synth.WriteCSV(&file, 3701, 400, []string{hostedMetersPostcode})).To(Succeed())
		store := &meterstore.Store{Pool: testDB.Pool}
		_, err := store.Import(ctx, &file, nil)
		Expect(err).NotTo(HaveOccurred())
		points, err = store.AtPostcode(ctx, hostedMetersPostcode, meters.MaxSearchResults)
		Expect(err).NotTo(HaveOccurred())
		Expect(len(points)).To(BeNumerically(">", 1))
		hosted = func(method, path, token string, body any) (int, response) {
			status, data, err := testenv.CallWithHeaders(apiServer.URL, method, path, token, body,
				map[string]string{server.EmbedderOriginHeader: "https://app.example.com"})
			Expect(err).NotTo(HaveOccurred())
			return status, data
		}
		user = func(o org, externalID string) (string, string) {
			u := mustCall("POST", "/auth/component-token", o.token(), componentForm(externalID,
				"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
			return u["id"].(string), u["access_token"].(string)
		}
	})

	search := func(token, postcode, building string) (int, response) {
		q := url.Values{"postcode": {postcode}, "building_identifier": {building}}
		return hosted("GET", "/hosted/api/meters?"+q.Encode(), token, nil)
	}

	It("lists the addresses at a postcode with references and never an MPAN, and the picked reference sets the site's MPAN, shown masked", func(ctx SpecContext) {
		o := newOrg(ctx)
		siteID, tok := user(o, "find-my-meter")

		status, data := search(tok, "ec1a1bb", "")
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		found := data.Map()
		Expect(found["postcode"]).To(Equal(hostedMetersPostcode))
		addresses := found["addresses"].([]any)
		Expect(addresses).To(HaveLen(len(points)))
		Expect(found["status"]).To(Equal(hostedflow.MetersFound(len(points), hostedMetersPostcode, len(points) == meters.MaxSearchResults)))
		for i, a := range addresses {
			Expect(a).To(HaveKeyWithValue("address", points[i].Address()))
			Expect(a.(map[string]any)["ref"]).NotTo(BeEmpty())
		}
		for _, pt := range points {
			Expect(string(data)).NotTo(ContainSubstring(pt.MPAN), "no MPAN in a search answer")
		}

		By("a house number narrows the list")
		status, data = search(tok, hostedMetersPostcode, strings.Fields(points[0].AddressLines[0])[0])
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()["addresses"]).NotTo(BeEmpty())

		By("the picked address's reference is the address step's meter")
		picked := addresses[1].(map[string]any)
		status, data = hosted("PUT", "/hosted/api/address", tok, map[string]any{"postcode": hostedMetersPostcode,
			"street_address": picked["street_address"], "meter_ref": picked["ref"]})
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(string(data)).NotTo(ContainSubstring(points[1].MPAN), "the household's answer masks the MPAN")
		Expect(data.Map()).To(HaveKeyWithValue("mpan_masked", meters.MaskedMPAN(points[1].MPAN)))
		Expect(data.Map()).To(HaveKeyWithValue("street_address", picked["street_address"]))
		site := mustCall("GET", "/entities/site/"+siteID, o.token(), nil)
		Expect(site).To(HaveKeyWithValue("mpan", points[1].MPAN))
		Expect(site).To(HaveKeyWithValue("postcode", hostedMetersPostcode))

		By("the household's own view shows it masked, and a later address step may leave the meter out")
		status, data = hosted("GET", "/hosted/api/household", tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(string(data)).NotTo(ContainSubstring(points[1].MPAN))
		Expect(data.Map()["site"]).To(HaveKeyWithValue("mpan_masked", meters.MaskedMPAN(points[1].MPAN)))
		status, data = hosted("PUT", "/hosted/api/address", tok, map[string]any{"postcode": hostedMetersPostcode,
			"street_address": "Changed", "mpan": ""})
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(mustCall("GET", "/entities/site/"+siteID, o.token(), nil)).To(HaveKeyWithValue("mpan", points[1].MPAN))
	})

	It("refuses a tampered reference, and another organisation's, at the meter_ref field in words, and stores nothing", func(ctx SpecContext) {
		a, b := newOrg(ctx), newOrg(ctx)
		_, tokA := user(a, "find-my-meter-a")
		_, tokB := user(b, "find-my-meter-b")
		status, data := search(tokB, hostedMetersPostcode, "")
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		refB := data.Map()["addresses"].([]any)[0].(map[string]any)["ref"].(string)
		status, data = search(tokA, hostedMetersPostcode, "")
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		refA := data.Map()["addresses"].([]any)[0].(map[string]any)["ref"].(string)
		flipped := []byte(refA)
		flipped[len(flipped)/2] ^= 0x01 // another base64url character: another reference
		if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", rune(flipped[len(flipped)/2])) {
			flipped[len(flipped)/2] = 'A'
		}
		Expect(string(flipped)).NotTo(Equal(refA))

		before := snapshot(ctx, a.Namespace)
		for name, ref := range map[string]string{"another organisation's": refB, "tampered": string(flipped), "made up": "not-a-ref"} {
			status, data := hosted("PUT", "/hosted/api/address", tokA, map[string]any{"postcode": hostedMetersPostcode,
				"meter_ref": ref})
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", name, data)
			Expect(data.Detail()).To(ConsistOf(And(HaveKeyWithValue("loc", []any{"body", "meter_ref"}),
				HaveKeyWithValue("msg", hostedflow.MeterRefWords))), name)
		}
		Expect(snapshot(ctx, a.Namespace)).To(Equal(before))

		By("a site with no MPAN still needs a meter")
		status, data = hosted("PUT", "/hosted/api/address", tokA, map[string]any{"postcode": hostedMetersPostcode})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", data)
		Expect(data.Detail()).To(ConsistOf(HaveKeyWithValue("loc", []any{"body", "mpan"})))
		Expect(snapshot(ctx, a.Namespace)).To(Equal(before))
	})

	It("answers a postcode that is not one, and an overlong house name, at their query fields in words; none found is an empty list", func(ctx SpecContext) {
		o := newOrg(ctx)
		_, tok := user(o, "find-my-meter-bad")
		for _, pc := range []string{"not a postcode", "%", "_", "'", `\`, strings.Repeat("A", 10_000)} {
			status, data := search(tok, pc, "")
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%q: %s", pc, data)
			Expect(data.Detail()).To(ConsistOf(And(HaveKeyWithValue("loc", []any{"query", "postcode"}),
				HaveKeyWithValue("msg", hostedflow.MeterPostcodeWords))))
		}
		status, data := search(tok, hostedMetersPostcode, strings.Repeat("x", meters.MaxBuildingBytes+1))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", data)
		Expect(data.Detail()).To(ConsistOf(HaveKeyWithValue("loc", []any{"query", "building_identifier"})))
		By("wildcard-looking identifiers are text, never patterns or SQL: they name no building")
		for _, building := range []string{"%", "_", "'", `\`, "' OR 1=1 --"} {
			status, data = search(tok, hostedMetersPostcode, building)
			Expect(status).To(Equal(http.StatusOK), "%q: %s", building, data)
			Expect(data.Map()["addresses"]).To(BeEmpty(), "%q names no building", building)
		}

		By("a postcode with no meter points: none, and what to do, in words")
		status, data = search(tok, "ZE9 9ZZ", "")
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()["addresses"]).To(BeEmpty())
		Expect(data.Map()["status"]).To(Equal(hostedflow.MetersFound(0, "ZE9 9ZZ", false)))

		By("an organisation's token is not the flow's")
		status, _ = hosted("GET", "/hosted/api/meters?postcode=EC1A1BB", o.token(), nil)
		Expect(status).To(Equal(http.StatusForbidden))
	})

	It("answers a search 503 with Retry-After while the register's database is down, and finds again once it is back", Serial, func(ctx SpecContext) {
		if !database.CanStop() {
			Skip("the test database is not this process's server ($FLEXSITE_TEST_DATABASE_URL)")
		}
		o := newOrg(ctx)
		_, tok := user(o, "find-my-meter-outage")
		Expect(database.Stop()).To(Succeed())
		stopped := true
		DeferCleanup(func(ctx SpecContext) {
			if stopped {
				Expect(database.Start(ctx)).To(Succeed())
			}
		})
		req, err := http.NewRequestWithContext(ctx, http.MethodGet,
			apiServer.URL+"/hosted/api/meters?postcode="+url.QueryEscape(hostedMetersPostcode), nil)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set(server.EmbedderOriginHeader, "https://app.example.com")
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		Expect(resp.StatusCode).To(Equal(http.StatusServiceUnavailable), "%s", body)
		Expect(resp.Header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(response(body).Detail()).To(Equal(hostedflow.MeterUnavailableWords))

		Expect(database.Start(ctx)).To(Succeed())
		stopped = false
		// The suite's own pool holds connections the stop ended: the next spec's queries
		// must not meet them.
		database.Pool.Reset()
		Eventually(func() error { _, err := database.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
		Eventually(func() int { status, _ := search(tok, hostedMetersPostcode, ""); return status }).Should(Equal(http.StatusOK))
	})
})
