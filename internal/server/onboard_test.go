package server_test

import (
	"net/http"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

var _ = Describe("POST /entities/site/onboard", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("creates the site, its assets and the enrolment, and stores them as resources", func(ctx SpecContext) {
		body := mustCall("POST", "/entities/site/onboard", tok, household("1200000000011"))
		site := body["site"].(map[string]any)
		Expect(site["site_created"]).To(BeTrue())
		Expect(site["fields_updated"]).To(BeEmpty())
		Expect(site["warnings"]).To(BeEmpty())
		Expect(site["site_id"]).To(MatchRegexp(`^[0-9a-f-]{36}$`))
		assets := body["assets"].([]any)
		Expect(assets).To(HaveLen(2))
		for _, a := range assets {
			Expect(a.(map[string]any)["asset_created"]).To(BeTrue())
		}
		Expect(body["enrolment"]).To(Equal(map[string]any{"site_id": site["site_id"], "status": "enrolled"}))

		stored := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN("1200000000011")}, stored)).To(Succeed())
		Expect(stored.Labels[flexv1.IDLabel]).To(Equal(site["site_id"]))
		Expect(stored.Spec.Postcode).To(Equal("SW1A 1AA"))
		Expect(stored.Spec.BoundaryMeterConsentAt).NotTo(BeNil())
		charger := &flexv1.Asset{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.AssetName("charger-1200000000011")}, charger)).To(Succeed())
		Expect(charger.Spec.SiteName).To(Equal(stored.Name))
		Expect(*charger.Spec.PowerW).To(Equal(int64(7400)))
		Expect(charger.Labels[flexv1.IDLabel]).To(Equal(assets[0].(map[string]any)["asset_id"]))
	})

	It("merges new fields into existing records and names exactly the fields it changed", func(ctx SpecContext) {
		mustCall("POST", "/entities/site/onboard", tok, household("1012345678903"))
		changed := household("1012345678903", func(b map[string]any) {
			site := b["site"].(map[string]any)
			site["email"] = "new@example.com"
			site["street_address"] = "11 Downing Street"
			delete(site, "gave_boundary_meter_consent_at") // omitted: kept, not cleared
			battery := b["assets"].([]any)[1].(map[string]any)
			battery["asset_model"] = "givenergy_all_in_one"
			battery["properties"] = map[string]any{"power_kw": 6}
		})
		body := mustCall("POST", "/entities/site/onboard", tok, changed)
		Expect(body["site"].(map[string]any)["fields_updated"]).To(ConsistOf("email", "street_address"))
		Expect(body["assets"].([]any)[0].(map[string]any)["fields_updated"]).To(BeEmpty())
		Expect(body["assets"].([]any)[1].(map[string]any)["fields_updated"]).To(ConsistOf("asset_model", "properties.power_kw"))

		stored := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN("1012345678903")}, stored)).To(Succeed())
		Expect(stored.Spec.Email).To(Equal("new@example.com"))
		Expect(stored.Spec.BoundaryMeterConsentAt).NotTo(BeNil(), "an omitted field keeps its stored value")
	})

	Describe("atomicity: a failed onboard leaves no trace", func() {
		var before string
		BeforeEach(func(ctx SpecContext) {
			// Something already stored in the organisation, which must stay exactly as it is.
			mustCall("POST", "/entities/site/onboard", tok, household("1200000000011"))
			before = snapshot(Default, ctx, o.Namespace)
		})
		AfterEach(func(ctx SpecContext) {
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		})

		It("refuses an asset registered to another site with the 409 object form", func() {
			stolen := household("2301234567894", func(b map[string]any) {
				b["assets"].([]any)[0].(map[string]any)["external_id"] = "charger-1200000000011"
			})
			status, resp := call("POST", "/entities/site/onboard", tok, stolen)
			Expect(status).To(Equal(http.StatusConflict), "%s", resp)
			detail := resp.Detail().(map[string]any)
			Expect(detail["external_id"]).To(Equal("charger-1200000000011"))
			Expect(detail["existing_asset_id"]).To(MatchRegexp(`^[0-9a-f-]{36}$`))
			Expect(detail["message"]).To(ContainSubstring("different site"))
		})

		It("refuses a site that is not eligible, with the eligibility record", func() {
			status, resp := call("POST", "/entities/site/onboard", tok, household("2301234567894", func(b map[string]any) {
				b["assets"] = []any{map[string]any{"external_id": "bare", "type": "battery"}}
			}))
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			detail := resp.Detail().(map[string]any)
			Expect(detail["code"]).To(Equal("prerequisites_not_met"))
			Expect(detail["message"]).To(ContainSubstring("asset_model_not_set"))
			eligibility := detail["eligibility"].(map[string]any)
			Expect(eligibility["eligible_propositions"]).To(BeEmpty())
			Expect(eligibility["assets"]).To(HaveLen(1))
		})

		It("refuses without boundary meter consent where the proposition needs it (400)", func() {
			status, resp := call("POST", "/entities/site/onboard", tok, household("2301234567894", func(b map[string]any) {
				delete(b["site"].(map[string]any), "gave_boundary_meter_consent_at")
				b["proposition"] = "full_asset_schedule_control"
			}))
			Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
			Expect(resp.Detail()).To(ContainSubstring("consent"))
		})

		It("answers an unknown asset model with 404", func() {
			status, resp := call("POST", "/entities/site/onboard", tok, household("2301234567894", func(b map[string]any) {
				b["assets"].([]any)[0].(map[string]any)["asset_model"] = "no-such-model"
			}))
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		})

		It("refuses a site that withdrew, unless the request overrides the withdrawal", func(ctx SpecContext) {
			site := &flexv1.Site{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN("1200000000011")}, site)).To(Succeed())
			siteID := site.Labels[flexv1.IDLabel]
			Expect(mustCall("POST", "/entities/site/"+siteID+"/unenrol", tok, map[string]any{"proposition": "limited_pause"})["status"]).
				To(Equal("unenrolled"))
			// The enrolment's finalizer (which confirms the withdrawal is on record) lets it go.
			Eventually(func(g Gomega) []flexv1.Enrolment {
				list := &flexv1.EnrolmentList{}
				g.Expect(k8sClient.List(ctx, list, client.InNamespace(o.Namespace))).To(Succeed())
				return list.Items
			}).Should(BeEmpty())
			before = snapshot(Default, ctx, o.Namespace)

			status, resp := call("POST", "/entities/site/onboard", tok, household("1200000000011"))
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			detail := resp.Detail().(map[string]any)
			Expect(detail["code"]).To(Equal("previously_withdrew"))
			Expect(detail["eligibility"].(map[string]any)["site_id"]).To(Equal(siteID))
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

			body := mustCall("POST", "/entities/site/onboard", tok, household("1200000000011", func(b map[string]any) {
				b["override_withdrawal"] = true
			}))
			Expect(body["enrolment"].(map[string]any)["status"]).To(Equal("enrolled"))
			before = snapshot(Default, ctx, o.Namespace) // the successful override changed state on purpose
		})
	})

	It("yields one site and one set of assets under 50 identical concurrent onboards", func(ctx SpecContext) {
		const n = 50
		var wg sync.WaitGroup
		statuses := make([]int, n)
		bodies := make([]response, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				statuses[i], bodies[i] = call("POST", "/entities/site/onboard", tok, household("1234567890126"))
			}()
		}
		wg.Wait()
		siteIDs, assetIDs := make([]any, 0, n), make([]any, 0, n)
		enrolled := 0
		for i := range n {
			Expect(statuses[i]).To(Equal(http.StatusOK), "%s", bodies[i])
			b := bodies[i].Map()
			siteIDs = append(siteIDs, b["site"].(map[string]any)["site_id"])
			assetIDs = append(assetIDs, b["assets"].([]any)[0].(map[string]any)["asset_id"])
			if b["enrolment"].(map[string]any)["status"] == "enrolled" {
				enrolled++
			}
		}
		Expect(siteIDs).To(HaveEach(Equal(siteIDs[0])))
		Expect(assetIDs).To(HaveEach(Equal(assetIDs[0])))
		Expect(enrolled).To(BeNumerically(">=", 1))

		sites := &flexv1.SiteList{}
		Expect(k8sClient.List(ctx, sites, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(sites.Items).To(HaveLen(1))
		assets := &flexv1.AssetList{}
		Expect(k8sClient.List(ctx, assets, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(assets.Items).To(HaveLen(2))
		enrolments := &flexv1.EnrolmentList{}
		Expect(k8sClient.List(ctx, enrolments, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(enrolments.Items).To(HaveLen(1))
	})
})

var _ = Describe("Validation", func() {
	var tok string
	BeforeEach(func(ctx SpecContext) { tok = newOrg(ctx).token() })

	type want struct {
		loc []any
		typ string
	}
	DescribeTable("answers malformed onboard input with a 422 validation record, never a 500",
		func(body any, expected want) {
			status, resp := call("POST", "/entities/site/onboard", tok, body)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			items := resp.Detail().([]any)
			Expect(items).NotTo(BeEmpty())
			var matched bool
			for _, it := range items {
				item := it.(map[string]any)
				Expect(item).To(HaveKey("msg"))
				if item["type"] == expected.typ && (expected.loc == nil || equalLoc(item["loc"].([]any), expected.loc)) {
					matched = true
				}
			}
			Expect(matched).To(BeTrue(), "want %v at %v in %s", expected.typ, expected.loc, resp)
		},
		Entry("invalid JSON", raw(`{"site": `), want{nil, "json_invalid"}),
		Entry("a JSON array", raw(`[1,2]`), want{[]any{"body"}, "model_attributes_type"}),
		Entry("missing site", map[string]any{"assets": []any{}, "proposition": "limited_pause"}, want{[]any{"body", "site"}, "missing"}),
		Entry("no assets", household("1200000000011", func(b map[string]any) { b["assets"] = []any{} }), want{[]any{"body", "assets"}, "too_short"}),
		Entry("assets not a list", household("1200000000011", func(b map[string]any) { b["assets"] = "charger" }), want{[]any{"body", "assets"}, "list_type"}),
		Entry("mpan a number", household("1200000000011", func(b map[string]any) { b["site"].(map[string]any)["mpan"] = 1200000000011 }),
			want{[]any{"body", "site", "mpan"}, "string_type"}),
		Entry("bad MPAN check digit", household("1234567890123"), want{[]any{"body", "site", "mpan"}, "value_error"}),
		Entry("bad postcode", household("1200000000011", func(b map[string]any) { b["site"].(map[string]any)["postcode"] = "XYZ" }),
			want{[]any{"body", "site", "postcode"}, "value_error"}),
		Entry("consent without a zone", household("1200000000011", func(b map[string]any) {
			b["site"].(map[string]any)["gave_boundary_meter_consent_at"] = "2026-01-15T10:30:00"
		}), want{[]any{"body", "site", "gave_boundary_meter_consent_at"}, "timezone_aware"}),
		Entry("unknown asset type", household("1200000000011", func(b map[string]any) { b["assets"].([]any)[0].(map[string]any)["type"] = "toaster" }),
			want{[]any{"body", "assets", 0.0, "type"}, "enum"}),
		Entry("negative power", household("1200000000011", func(b map[string]any) {
			b["assets"].([]any)[1].(map[string]any)["properties"] = map[string]any{"power_kw": -3}
		}), want{[]any{"body", "assets", 1.0, "properties", "power_kw"}, "greater_than_equal"}),
		Entry("power a string", household("1200000000011", func(b map[string]any) {
			b["assets"].([]any)[1].(map[string]any)["properties"] = map[string]any{"power_kw": "7kW"}
		}), want{[]any{"body", "assets", 1.0, "properties", "power_kw"}, "float_type"}),
		Entry("installation date in the future", household("1200000000011", func(b map[string]any) {
			b["assets"].([]any)[0].(map[string]any)["installation_date"] = "2999-01-01"
		}), want{[]any{"body", "assets", 0.0, "installation_date"}, "value_error"}),
		Entry("unknown proposition", household("1200000000011", func(b map[string]any) { b["proposition"] = "free_money" }),
			want{[]any{"body", "proposition"}, "enum"}),
		Entry("override_withdrawal not a boolean", household("1200000000011", func(b map[string]any) { b["override_withdrawal"] = "yes" }),
			want{[]any{"body", "override_withdrawal"}, "bool_type"}),
		Entry("duplicate external ids", household("1200000000011", func(b map[string]any) {
			b["assets"].([]any)[1].(map[string]any)["external_id"] = "charger-1200000000011"
		}), want{[]any{"body", "assets", 1.0, "external_id"}, "value_error"}),
	)

	It("answers a non-uuid site_id with a 422 on the path", func() {
		status, resp := call("GET", "/entities/site/not-a-uuid/eligibility", tok, nil)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.Detail().([]any)[0].(map[string]any)["loc"]).To(Equal([]any{"path", "site_id"}))
	})
})

// equalLoc compares a decoded loc (numbers arrive as float64) with an expected one.
func equalLoc(got, want []any) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] {
			return false
		}
	}
	return true
}
