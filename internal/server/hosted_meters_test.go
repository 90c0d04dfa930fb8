package server_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/hostedflow"
	hh "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/meters"
	"github.com/flexsite/flexsite/internal/meters/synth"
	"github.com/flexsite/flexsite/internal/meterstore"
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
				map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
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
		mid := len(flipped) / 2
		flipped[mid] ^= 0x01 // another base64url character: another reference
		if !strings.ContainsRune("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_", rune(flipped[mid])) {
			// Flipped out of the alphabet: another letter of it, never the one it was.
			flipped[mid] = 'A'
			if refA[mid] == 'A' {
				flipped[mid] = 'B'
			}
		}
		Expect(string(flipped)).NotTo(Equal(refA))

		before := snapshot(Default, ctx, a.Namespace)
		for name, ref := range map[string]string{"another organisation's": refB, "tampered": string(flipped), "made up": "not-a-ref"} {
			status, data := hosted("PUT", "/hosted/api/address", tokA, map[string]any{"postcode": hostedMetersPostcode,
				"meter_ref": ref})
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", name, data)
			Expect(data.Detail()).To(ConsistOf(And(HaveKeyWithValue("loc", []any{"body", "meter_ref"}),
				HaveKeyWithValue("msg", hostedflow.MeterRefWords))), name)
		}
		Expect(snapshot(Default, ctx, a.Namespace)).To(Equal(before))

		By("a site with no MPAN still needs a meter")
		status, data = hosted("PUT", "/hosted/api/address", tokA, map[string]any{"postcode": hostedMetersPostcode})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", data)
		Expect(data.Detail()).To(ConsistOf(HaveKeyWithValue("loc", []any{"body", "mpan"})))
		Expect(snapshot(Default, ctx, a.Namespace)).To(Equal(before))
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

	// hostedRaw is hosted with the answer's headers (Retry-After).
	hostedRaw := func(ctx SpecContext, method, path, token string, body any) (int, http.Header, response) {
		GinkgoHelper()
		var reader io.Reader
		if body != nil {
			raw, err := json.Marshal(body)
			Expect(err).NotTo(HaveOccurred())
			reader = bytes.NewReader(raw)
		}
		req, err := http.NewRequestWithContext(ctx, method, apiServer.URL+path, reader)
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set(hostedflow.EmbedderOriginHeader, "https://app.example.com")
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		data, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		Expect(err).NotTo(HaveOccurred())
		return resp.StatusCode, resp.Header, response(data)
	}
	pick := func(ref map[string]any, postcode string) map[string]any {
		return map[string]any{"postcode": postcode, "street_address": ref["street_address"], "meter_ref": ref["ref"]}
	}
	found := func(token string) []map[string]any {
		GinkgoHelper()
		status, data := search(token, hostedMetersPostcode, "")
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		addresses := data.Map()["addresses"].([]any)
		out := make([]map[string]any, 0, len(addresses))
		for _, a := range addresses {
			out = append(out, a.(map[string]any))
		}
		Expect(out).To(HaveLen(len(points)))
		return out
	}

	It("never tells a household a full MPAN: not the meter it picked, not its own site's, not in a 409 over a neighbour's meter", func(ctx SpecContext) {
		o := newOrg(ctx)
		walkerID, walker := user(o, "mpan-walker")
		neighbourID, neighbour := user(o, "mpan-neighbour")
		var answers []string // every answer either household was given
		keep := func(status int, data response) (int, response) {
			answers = append(answers, string(data))
			return status, data
		}
		last := len(points) - 1
		lastMPAN := points[last].MPAN

		By("the walk: search, pick the last address (a neighbour's meter), read the own site back")
		status, data := keep(search(walker, hostedMetersPostcode, ""))
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		ref := data.Map()["addresses"].([]any)[last].(map[string]any)
		status, data = keep(hosted("PUT", "/hosted/api/address", walker, pick(ref, hostedMetersPostcode)))
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()).To(HaveKeyWithValue("mpan_masked", meters.MaskedMPAN(lastMPAN)))
		status, data = keep(call("GET", "/entities/site/"+walkerID, walker, nil))
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()).To(HaveKeyWithValue("mpan", meters.MaskedMPAN(lastMPAN)), "the household's read of its site")

		By("every other answer of the household's site: PATCH, meter consent, dispatch consent, the flow's own view")
		status, data = keep(call("PATCH", "/entities/site/"+walkerID, walker, map[string]any{"address": "1 Walk Road"}))
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()).To(HaveKeyWithValue("mpan", meters.MaskedMPAN(lastMPAN)))
		status, data = keep(call("POST", "/entities/site/"+walkerID+"/meter-consent", walker,
			map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T00:00:00Z"}))
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()).To(HaveKeyWithValue("mpan", meters.MaskedMPAN(lastMPAN)))
		status, data = keep(call("POST", "/entities/site/"+walkerID+"/dispatch-consent", walker,
			map[string]any{"dispatch_methods": []any{"limited_pause"}}))
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(data.Map()).To(HaveKeyWithValue("mpan", meters.MaskedMPAN(lastMPAN)))
		status, data = keep(hosted("GET", "/hosted/api/household", walker, nil))
		Expect(status).To(Equal(http.StatusOK), "%s", data)

		By("the neighbour whose meter it is is refused with 409, told no more than its last four digits")
		status, data = keep(hosted("PUT", "/hosted/api/address", neighbour, pick(found(neighbour)[last], hostedMetersPostcode)))
		Expect(status).To(Equal(http.StatusConflict), "%s", data)
		Expect(data.Detail()).To(ContainSubstring(meters.MaskedMPAN(lastMPAN)))
		status, data = keep(call("PATCH", "/entities/site/"+neighbourID, neighbour, map[string]any{"mpan": lastMPAN}))
		Expect(status).To(Equal(http.StatusConflict), "%s", data)

		for _, answer := range answers {
			for _, pt := range points {
				Expect(answer).NotTo(ContainSubstring(pt.MPAN), "no answer to a household holds a full MPAN")
			}
		}

		By("the organisation's own API client still reads and is refused with the full MPAN")
		Expect(mustCall("GET", "/entities/site/"+walkerID, o.token(), nil)).To(HaveKeyWithValue("mpan", lastMPAN))
		status, data = call("PATCH", "/entities/site/"+neighbourID, o.token(), map[string]any{"mpan": lastMPAN})
		Expect(status).To(Equal(http.StatusConflict), "%s", data)
		Expect(data.Detail()).To(ContainSubstring(lastMPAN))
	})

	It("lets a household change its meter at most its daily budget of changes (household.MeterChangesPerDay), then answers 429 with Retry-After and moves no claim; the organisation is not counted", func(ctx SpecContext) {
		budget := hh.MeterChangesPerDay
		Expect(len(points)).To(BeNumerically(">", budget+1))
		o := newOrg(ctx)
		siteID, tok := user(o, "meter-budget")
		refs := found(tok)
		for i := range budget {
			status, data := hosted("PUT", "/hosted/api/address", tok, pick(refs[i], hostedMetersPostcode))
			Expect(status).To(Equal(http.StatusOK), "change %d: %s", i+1, data)
		}
		By("saving the same meter again changes nothing and spends nothing")
		status, data := hosted("PUT", "/hosted/api/address", tok, pick(refs[budget-1], hostedMetersPostcode))
		Expect(status).To(Equal(http.StatusOK), "%s", data)

		By("one change more is refused, through the flow and through the REST API, and nothing moves")
		before := snapshot(Default, ctx, o.Namespace)
		status, header, data := hostedRaw(ctx, "PUT", "/hosted/api/address", tok, pick(refs[budget], hostedMetersPostcode))
		Expect(status).To(Equal(http.StatusTooManyRequests), "%s", data)
		Expect(data.Detail()).To(Equal(hostedflow.MeterChangesWords))
		wait, err := strconv.Atoi(header.Get("Retry-After"))
		Expect(err).NotTo(HaveOccurred(), "Retry-After %q", header.Get("Retry-After"))
		Expect(wait).To(And(BeNumerically(">", 0), BeNumerically("<=", int(hh.MeterChangeWindow.Seconds()))))
		status, header, data = hostedRaw(ctx, "PATCH", "/entities/site/"+siteID, tok, map[string]any{"mpan": points[budget].MPAN})
		Expect(status).To(Equal(http.StatusTooManyRequests), "%s", data)
		Expect(header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		Expect(mustCall("GET", "/entities/site/"+siteID, o.token(), nil)).To(HaveKeyWithValue("mpan", points[budget-1].MPAN))

		By("the meter it could not take is still free for its own household")
		_, other := user(o, "meter-budget-other")
		status, data = hosted("PUT", "/hosted/api/address", other, pick(found(other)[budget], hostedMetersPostcode))
		Expect(status).To(Equal(http.StatusOK), "%s", data)

		By("the organisation's API client may still change the site's meter")
		Expect(mustCall("PATCH", "/entities/site/"+siteID, o.token(), map[string]any{"mpan": points[budget+1].MPAN})).
			To(HaveKeyWithValue("mpan", points[budget+1].MPAN))
	})

	It("refuses a picked address saved with another postcode than the one it was found at, at meter_ref in words, and stores nothing", func(ctx SpecContext) {
		o := newOrg(ctx)
		siteID, tok := user(o, "meter-elsewhere")
		ref := found(tok)[0]
		before := snapshot(Default, ctx, o.Namespace)
		status, data := hosted("PUT", "/hosted/api/address", tok, pick(ref, "SW1A 1AA"))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", data)
		Expect(data.Detail()).To(ConsistOf(And(HaveKeyWithValue("loc", []any{"body", "meter_ref"}),
			HaveKeyWithValue("msg", hostedflow.MeterElsewhereWords))))
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

		By("the postcode it was found at, however it is spelt, takes it")
		status, data = hosted("PUT", "/hosted/api/address", tok, pick(ref, strings.ToLower(strings.ReplaceAll(hostedMetersPostcode, " ", ""))))
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(mustCall("GET", "/entities/site/"+siteID, o.token(), nil)).To(HaveKeyWithValue("mpan", points[0].MPAN))
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
		req.Header.Set(hostedflow.EmbedderOriginHeader, "https://app.example.com")
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
