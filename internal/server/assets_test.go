package server_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db/dbtest"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/meterstore"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/validation"
)

// Specs of the asset endpoints (create, get by id and by external id) and of MPAN validation.

// createAssetBody is a complete create-asset request for a site.
func createAssetBody(siteID, externalID string) map[string]any {
	return map[string]any{
		"external_id": externalID, "type": "battery", "site_id": siteID,
		"properties":  map[string]any{"power_kw": 5, "capacity_kwh": 9.5},
		"asset_model": "givenergy_all_in_one", "installation_date": "2025-03-01", "serial_number": "GE-0042",
	}
}

var _ = Describe("POST /entities/asset", func() {
	var (
		o      org
		tok    string
		siteID string
	)
	const mpan = "1200000000011"
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
		// A site whose only asset qualifies for nothing: no model, no installation date.
		siteID = entitySiteID(entityInitialise(tok, mpan, func(b map[string]any) {
			b["assets"] = []any{map[string]any{"external_id": "bare-battery", "type": "battery"}}
		}))
	})

	It("creates the asset at the site, stores its fields, and the site's eligibility follows", func(ctx SpecContext) {
		Expect(mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)["eligible_propositions"]).To(BeEmpty())

		record := mustCall("POST", "/entities/asset", tok, createAssetBody(siteID, "battery-2"))
		Expect(record).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id":                    MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
			"external_id":           Equal("battery-2"),
			"type":                  Equal("battery"),
			"site_id":               Equal(siteID),
			"properties":            Equal(map[string]any{"power_kw": 5.0, "capacity_kwh": 9.5}),
			"needs_reauthorisation": BeFalse(),
		}))
		assetID := record["id"].(string)

		By("storing the asset with every field of the request")
		asset := entityStoredAsset(ctx, o.Namespace, "battery-2")
		Expect(asset.Labels[flexv1.IDLabel]).To(Equal(assetID))
		Expect(asset.Spec).To(gstruct.MatchAllFields(gstruct.Fields{
			"SiteName":             Equal(identity.SiteNameForMPAN(mpan)),
			"ExternalID":           Equal("battery-2"),
			"Type":                 Equal(flexv1.AssetTypeBattery),
			"Model":                Equal("givenergy_all_in_one"),
			"InstallationDate":     Equal("2025-03-01"),
			"SerialNumber":         Equal("GE-0042"),
			"PowerW":               HaveValue(Equal(int64(5000))),
			"CapacityWh":           HaveValue(Equal(int64(9500))),
			"CustomDispatchPowerW": BeNil(),
		}))

		By("listing it in the site's eligibility, which it makes eligible")
		Eventually(func(g Gomega) {
			status, resp := call("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			rec := resp.MapG(g)
			g.Expect(rec["assets"]).To(HaveLen(2))
			g.Expect(rec["assets"]).To(ContainElement(gstruct.MatchAllKeys(gstruct.Keys{
				"asset_id": Equal(assetID), "external_id": Equal("battery-2"),
				"propositions": HaveEach(HaveKeyWithValue("is_eligible", true)),
			})))
			g.Expect(rec["eligible_propositions"]).To(ConsistOf("limited_pause", "full_asset_schedule_control", "price_curve"))
		}).Should(Succeed())
		Eventually(func(g Gomega) {
			status, resp := call("GET", "/entities/site/"+siteID, tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			g.Expect(resp.MapG(g)["asset_ids"]).To(ContainElement(assetID))
		}).Should(Succeed())
	})

	It("creates an asset with only the required fields", func(ctx SpecContext) {
		record := mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": "hp-1", "type": "heat pump", "site_id": siteID})
		Expect(record).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": MatchRegexp(`^[0-9a-f-]{36}$`), "external_id": Equal("hp-1"), "type": Equal("heat pump"),
			"site_id": Equal(siteID), "properties": BeEmpty(), "needs_reauthorisation": BeFalse(),
		}))
		Expect(entityStoredAsset(ctx, o.Namespace, "hp-1").Spec.Type).To(Equal(flexv1.AssetTypeHeatPump))
	})

	DescribeTable("refuses a bad request with the documented status and stores nothing",
		func(ctx SpecContext, mutate func(body map[string]any), status int, typ string, loc ...any) {
			body := createAssetBody(siteID, "battery-2")
			mutate(body)
			before := snapshot(Default, ctx, o.Namespace)
			got, resp := call("POST", "/entities/asset", tok, body)
			if status == http.StatusUnprocessableEntity {
				entityExpectInvalid(got, resp, typ, loc...)
			} else {
				Expect(got).To(Equal(status), "%s", resp)
				Expect(resp.Detail()).To(BeAssignableToTypeOf(""))
			}
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		},
		Entry("unknown site", func(b map[string]any) { b["site_id"] = uuid.NewString() }, http.StatusNotFound, ""),
		Entry("site_id not a uuid", func(b map[string]any) { b["site_id"] = "site-1" },
			http.StatusUnprocessableEntity, "uuid_parsing", "body", "site_id"),
		Entry("missing site_id", func(b map[string]any) { delete(b, "site_id") },
			http.StatusUnprocessableEntity, "missing", "body", "site_id"),
		Entry("missing external_id", func(b map[string]any) { delete(b, "external_id") },
			http.StatusUnprocessableEntity, "missing", "body", "external_id"),
		Entry("missing type", func(b map[string]any) { delete(b, "type") },
			http.StatusUnprocessableEntity, "missing", "body", "type"),
		Entry("a type that is returned but not creatable", func(b map[string]any) { b["type"] = "boundary meter" },
			http.StatusUnprocessableEntity, "enum", "body", "type"),
		Entry("negative capacity", func(b map[string]any) { b["properties"] = map[string]any{"capacity_kwh": -1} },
			http.StatusUnprocessableEntity, "greater_than_equal", "body", "properties", "capacity_kwh"),
		Entry("power not a number", func(b map[string]any) { b["properties"] = map[string]any{"power_kw": "5kW"} },
			http.StatusUnprocessableEntity, "float_type", "body", "properties", "power_kw"),
		Entry("an external_id that exists", func(b map[string]any) { b["external_id"] = "bare-battery" }, http.StatusConflict, ""),
		Entry("unknown asset_model", func(b map[string]any) { b["asset_model"] = "no-such-model" }, http.StatusNotFound, ""),
		Entry("installation_date in the future", func(b map[string]any) { b["installation_date"] = "2999-01-01" },
			http.StatusUnprocessableEntity, "value_error", "body", "installation_date"),
		Entry("installation_date not a date", func(b map[string]any) { b["installation_date"] = "01/03/2025" },
			http.StatusUnprocessableEntity, "date_parsing", "body", "installation_date"),
		Entry("serial_number not a string", func(b map[string]any) { b["serial_number"] = map[string]any{"nested": true} },
			http.StatusUnprocessableEntity, "string_type", "body", "serial_number"),
	)

	It("refuses an asset whose external_id is taken at another site of the organisation", func(ctx SpecContext) {
		otherID := entitySiteID(entityInitialise(tok, "2301234567894"))
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := call("POST", "/entities/asset", tok, createAssetBody(otherID, "bare-battery"))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})

	It("creates one asset when the same create races with itself, and refuses the others with 409", func(ctx SpecContext) {
		const n = 10
		var wg sync.WaitGroup
		statuses := make([]int, n)
		bodies := make([]response, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				statuses[i], bodies[i] = call("POST", "/entities/asset", tok, createAssetBody(siteID, "battery-2"))
			}()
		}
		wg.Wait()
		created := 0
		for i := range n {
			Expect(statuses[i]).To(BeElementOf(http.StatusOK, http.StatusConflict), "%s", bodies[i])
			if statuses[i] == http.StatusOK {
				created++
				Expect(bodies[i].Map()["id"]).To(Equal(entityStoredAsset(ctx, o.Namespace, "battery-2").Labels[flexv1.IDLabel]))
			}
		}
		Expect(created).To(Equal(1))
		assets := &flexv1.AssetList{}
		Expect(k8sClient.List(ctx, assets, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(assets.Items).To(HaveLen(2))
	})

	It("refuses another organisation's site with 404", func(ctx SpecContext) {
		other := newOrg(ctx)
		status, resp := call("POST", "/entities/asset", other.token(), createAssetBody(siteID, "battery-2"))
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Site not found or not authorized"}))
		Expect(snapshot(Default, ctx, other.Namespace)).To(BeEmpty())
	})
})

var _ = Describe("GET /entities/asset/{asset_id} and /entities/asset/external-id/{external_id}", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("answers the same asset record by id and by external id", func(ctx SpecContext) {
		const mpan = "1012345678903"
		body := entityInitialise(tok, mpan)
		siteID := entitySiteID(body)
		chargerID := entityAssetIDs(body)[0].(string)

		byID := mustCall("GET", "/entities/asset/"+chargerID, tok, nil)
		Expect(byID).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": Equal(chargerID), "external_id": Equal("charger-" + mpan), "type": Equal("charger"),
			"site_id": Equal(siteID), "properties": Equal(map[string]any{"power_kw": 7.4}), "needs_reauthorisation": BeFalse(),
		}))
		Expect(mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)).To(Equal(byID))

		By("finding an external id that needs escaping in a path")
		created := mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": "EV charger #1?", "type": "charger", "site_id": siteID})
		Expect(mustCall("GET", "/entities/asset/external-id/"+url.PathEscape("EV charger #1?"), tok, nil)).To(Equal(created))
		Expect(mustCall("GET", "/entities/asset/"+created["id"].(string), tok, nil)).To(Equal(created))

		// needs_reauthorisation is the asset controller's, from the site's device connections
		// (false above: no connection); devices_test.go turns it true through a real lapse.

		By("answering 404 for unknown assets and 422 for a malformed id")
		status, resp := call("GET", "/entities/asset/"+uuid.NewString(), tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(BeAssignableToTypeOf(""))
		status, resp = call("GET", "/entities/asset/external-id/no-such-asset", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("GET", "/entities/asset/not-a-uuid", tok, nil)
		entityExpectInvalid(status, resp, "uuid_parsing", "path", "asset_id")

		By("answering 404 to another organisation")
		otherTok := newOrg(ctx).token()
		status, resp = call("GET", "/entities/asset/"+chargerID, otherTok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("GET", "/entities/asset/external-id/charger-"+mpan, otherTok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)

		By("keeping external ids apart between organisations: the other one registers the same ids as its own")
		otherBody := entityInitialise(otherTok, mpan)
		otherChargerID := entityAssetIDs(otherBody)[0].(string)
		Expect(otherChargerID).NotTo(Equal(chargerID))
		Eventually(func(g Gomega) {
			status, resp := call("GET", "/entities/asset/external-id/charger-"+mpan, otherTok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			g.Expect(resp.MapG(g)["id"]).To(Equal(otherChargerID))
			g.Expect(resp.MapG(g)["site_id"]).To(Equal(entitySiteID(otherBody)))
		}).Should(Succeed())
		Expect(mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"]).To(Equal(chargerID))
	})
})

// unregisteredMPAN is a well-formed MPAN of distributor 98, which neither the generated
// register (10 to 23) nor the handmade one (99) uses.
var unregisteredMPAN = func() string {
	first12 := "980000000001"
	return first12 + fmt.Sprint(validation.MPANCheckDigit(first12))
}()

var _ = Describe("POST /validation/mpan", func() {
	var tok string
	BeforeEach(func(ctx SpecContext) {
		ensureMeterRegister(ctx)
		tok = newOrg(ctx).token()
	})

	DescribeTable("validates an MPAN against the meter register",
		func(body any, status int, answer map[string]any) {
			got, resp := call("POST", "/validation/mpan", tok, body)
			Expect(got).To(Equal(status), "%s", resp)
			Expect(resp.Map()).To(Equal(answer))
		},
		Entry("an MPAN of the register", map[string]any{"mpan": meterMPAN(30)}, http.StatusOK, map[string]any{"isValid": true}),
		Entry("an MPAN of the register with spaces", map[string]any{"mpan": meterMPAN(30)[:2] + " " + meterMPAN(30)[2:6] + " " +
			meterMPAN(30)[6:10] + " " + meterMPAN(30)[10:]}, http.StatusOK, map[string]any{"isValid": true}),
		Entry("a well-formed MPAN the register does not hold", map[string]any{"mpan": unregisteredMPAN}, http.StatusNotFound,
			map[string]any{"detail": []any{"No connected import meter with this MPAN was found"}}),
		Entry("a failed check digit", map[string]any{"mpan": "1234567890123"}, http.StatusBadRequest,
			map[string]any{"detail": []any{"MPAN check digit is invalid"}}),
		Entry("too short", map[string]any{"mpan": "12345"}, http.StatusBadRequest,
			map[string]any{"detail": []any{"MPAN must be exactly 13 digits"}}),
		Entry("not digits", map[string]any{"mpan": "12000000000AB"}, http.StatusBadRequest,
			map[string]any{"detail": []any{"MPAN must be exactly 13 digits"}}),
	)

	It("counts a validation of a well-formed MPAN as a lookup of the register: 429 past the organisation's budget",
		func(ctx SpecContext) {
			replica := budgeted(server.MeterBudgets{OrganisationPerHour: 2, OrganisationPerDay: 100})
			start := clock.Load().UTC().Truncate(time.Hour).Add(10 * time.Minute)
			was := *clock.Load()
			DeferCleanup(func() { clock.Store(&was) })
			clock.Store(&start)
			own := newOrg(ctx).token()
			validate := func(mpan string) (int, string, response) {
				return readAnswer(limitedCall(replica, "POST", "/validation/mpan", own, "application/json",
					fmt.Sprintf(`{"mpan": %q}`, mpan)))
			}
			status, _, resp := validate("1234567890123") // malformed: refused before any lookup, costs nothing
			Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
			status, _, resp = validate(meterMPAN(30))
			Expect(status).To(Equal(http.StatusOK), "%s", resp)
			status, _, resp = validate(unregisteredMPAN)
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
			status, retryAfter, resp := validate(meterMPAN(30))
			Expect(status).To(Equal(http.StatusTooManyRequests), "%s", resp)
			Expect(retryAfter).To(Equal(untilHourEnds()))
		})

	It("checks the form alone while no register is loaded", func(ctx SpecContext) {
		empty, err := dbtest.New(ctx)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func(ctx SpecContext) { empty.Close(ctx) })
		cfg := apiSrv.Config
		cfg.MeterRegister = &meterstore.Store{Pool: empty.Pool}
		replica := httptest.NewServer(server.NewServer(cfg))
		DeferCleanup(replica.Close)
		status, _, resp := readAnswer(limitedCall(replica, "POST", "/validation/mpan", tok, "application/json",
			`{"mpan": "1200000000011"}`))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"isValid": true}))
		status, _, resp = readAnswer(limitedCall(replica, "POST", "/validation/mpan", tok, "application/json",
			`{"mpan": "1234567890123"}`))
		Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
	})

	It("answers a missing or mistyped mpan with 422 and no token with 401", func() {
		status, resp := call("POST", "/validation/mpan", tok, map[string]any{})
		entityExpectInvalid(status, resp, "missing", "body", "mpan")
		status, resp = call("POST", "/validation/mpan", tok, map[string]any{"mpan": 1200000000011})
		entityExpectInvalid(status, resp, "string_type", "body", "mpan")
		status, resp = call("POST", "/validation/mpan", tok, raw(`{"mpan":`))
		entityExpectInvalid(status, resp, "json_invalid")
		status, resp = call("POST", "/validation/mpan", "", map[string]any{"mpan": "1200000000011"})
		Expect(status).To(Equal(http.StatusUnauthorized), "%s", resp)
	})
})
