package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app"
	householdcore "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/testenv"
)

// Specs of the site endpoints other than onboard: initialise, eligibility, enrol/unenrol,
// the legacy site record (get, list, meter consent), the legacy onboard and offboard. Each
// spec runs in an organisation of its own and checks what is stored, not only the answer.

var allPropositionNames = []string{"limited_pause", "full_asset_schedule_control", "price_curve"}

// entityInitialiseBody is household(mpan) as an initialise request (no proposition).
func entityInitialiseBody(mpan string, mutate ...func(map[string]any)) map[string]any {
	body := household(mpan, mutate...)
	delete(body, "proposition")
	return body
}

// entityInitialise initialises household(mpan, mutate...) and returns the answer.
func entityInitialise(tok, mpan string, mutate ...func(map[string]any)) map[string]any {
	status, resp := call("POST", "/entities/site/initialise", tok, entityInitialiseBody(mpan, mutate...))
	ExpectWithOffset(1, status).To(Equal(http.StatusOK), "initialise: %s", resp)
	return resp.Map()
}

// entitySiteID is the site_id of an initialise or onboard answer.
func entitySiteID(answer map[string]any) string {
	return answer["site"].(map[string]any)["site_id"].(string)
}

// entityAssetIDs are the asset ids of an initialise or onboard answer, in request order.
func entityAssetIDs(answer map[string]any) []any {
	assets := answer["assets"].([]any)
	ids := make([]any, 0, len(assets))
	for _, a := range assets {
		ids = append(ids, a.(map[string]any)["asset_id"])
	}
	return ids
}

// entityStoredSite reads the Site of a meter point straight from the API server.
func entityStoredSite(g Gomega, ctx context.Context, ns, mpan string) *flexv1.Site {
	site := &flexv1.Site{}
	g.ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
	return site
}

// entityStoredAsset reads the Asset of an external id straight from the API server.
func entityStoredAsset(ctx context.Context, ns, externalID string) *flexv1.Asset {
	asset := &flexv1.Asset{}
	ExpectWithOffset(1, k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.AssetName(externalID)}, asset)).To(Succeed())
	return asset
}

// entityEnrolmentsOf lists the stored Enrolments of a site (whatever their names).
func entityEnrolmentsOf(g Gomega, ctx context.Context, ns, siteName string) []flexv1.Enrolment {
	list := &flexv1.EnrolmentList{}
	g.ExpectWithOffset(1, k8sClient.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	var out []flexv1.Enrolment
	for _, e := range list.Items {
		if e.Spec.SiteName == siteName {
			out = append(out, e)
		}
	}
	return out
}

// entityExpectInvalid asserts a 422 validation error record with an item of type typ at loc
// (list indexes as float64, as JSON decodes them; no loc: anywhere).
func entityExpectInvalid(status int, resp response, typ string, loc ...any) {
	ExpectWithOffset(1, status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
	items, ok := resp.Detail().([]any)
	ExpectWithOffset(1, ok).To(BeTrue(), "detail is not a validation error record: %s", resp)
	for _, it := range items {
		item := it.(map[string]any)
		ExpectWithOffset(1, item).To(HaveKey("msg"))
		if item["type"] == typ && (len(loc) == 0 || equalLoc(item["loc"].([]any), loc)) {
			return
		}
	}
	Fail("want " + typ + " at " + specJSON(loc) + " in " + resp.String())
}

// entityAssetEligibility is the item of an eligibility record's assets with externalID.
func entityAssetEligibility(record map[string]any, externalID string) map[string]any {
	for _, a := range record["assets"].([]any) {
		if a.(map[string]any)["external_id"] == externalID {
			return a.(map[string]any)
		}
	}
	Fail("no asset " + externalID + " in the eligibility record " + specJSON(record))
	return nil
}

// entityPropositionEligibility is an asset item's eligibility for one proposition.
func entityPropositionEligibility(asset map[string]any, proposition string) map[string]any {
	for _, p := range asset["propositions"].([]any) {
		if p.(map[string]any)["proposition"] == proposition {
			return p.(map[string]any)
		}
	}
	Fail("no proposition " + proposition + " in " + specJSON(asset))
	return nil
}

// entityStatusRecord renders a Site's status as the API's eligibility record, decoded from
// JSON, to compare with an answer.
func entityStatusRecord(g Gomega, site *flexv1.Site) map[string]any {
	eligible := make([]any, 0, len(site.Status.EligiblePropositions))
	for _, p := range site.Status.EligiblePropositions {
		eligible = append(eligible, string(p))
	}
	assets := make([]any, 0, len(site.Status.Assets))
	for _, a := range site.Status.Assets {
		props := make([]any, 0, len(a.Propositions))
		for _, p := range a.Propositions {
			issues := make([]any, 0, len(p.Issues))
			for _, i := range p.Issues {
				issues = append(issues, string(i))
			}
			props = append(props, map[string]any{"proposition": string(p.Proposition), "is_eligible": p.Eligible, "issues": issues})
		}
		assets = append(assets, map[string]any{"asset_id": a.ID, "external_id": a.ExternalID, "propositions": props})
	}
	record := map[string]any{
		"site_id": site.Labels[flexv1.IDLabel],
		"site_properties": map[string]any{
			"has_meter_consent": site.Status.Properties.HasMeterConsent, "is_half_hourly_settled": site.Status.Properties.IsHalfHourlySettled},
		"eligible_propositions": eligible,
		"assets":                assets,
	}
	var decoded map[string]any
	g.Expect(json.Unmarshal([]byte(specJSON(record)), &decoded)).To(Succeed())
	return decoded
}

// entityWaitActive waits until the controller has made an enrolment active.
func entityWaitActive(ctx context.Context, key client.ObjectKey) {
	EventuallyWithOffset(1, func(g Gomega) flexv1.EnrolmentPhase {
		e := &flexv1.Enrolment{}
		g.Expect(k8sClient.Get(ctx, key, e)).To(Succeed())
		return e.Status.Phase
	}).Should(Equal(flexv1.EnrolmentActive))
}

// entityWithdrewEvents counts the "Withdrew" events recorded in a namespace.
func entityWithdrewEvents(ctx context.Context, g Gomega, ns string) int {
	events := &eventsv1.EventList{}
	g.Expect(k8sClient.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, e := range events.Items {
		if e.Reason == "Withdrew" {
			n++
		}
	}
	return n
}

// entitySettled waits until the site's record lists n assets.
func entitySettled(tok, siteID string, n int) {
	EventuallyWithOffset(1, func(g Gomega) {
		status, resp := call("GET", "/entities/site/"+siteID, tok, nil)
		g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
		g.Expect(resp.MapG(g)["asset_ids"]).To(HaveLen(n))
	}).Should(Succeed())
}

// entityLinesWithout drops the snapshot lines that mention a name.
func entityLinesWithout(snap, name string) string {
	var kept []string
	for _, line := range strings.Split(snap, "\n") {
		if !strings.Contains(line, name) {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

var _ = Describe("POST /entities/site/initialise", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("creates the site and its assets, answers their results and eligibility, and enrols nothing; again it is idempotent",
		func(ctx SpecContext) {
			const mpan = "1200000000011"
			body := entityInitialise(tok, mpan)
			Expect(body).To(And(HaveKey("site"), HaveKey("assets"), HaveKey("eligibility")))
			Expect(body).NotTo(HaveKey("enrolment"))
			siteID := entitySiteID(body)
			Expect(siteID).To(MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`))
			Expect(body["site"]).To(Equal(map[string]any{
				"site_id": siteID, "site_created": true, "fields_updated": []any{}, "warnings": []any{}}))
			assets := body["assets"].([]any)
			Expect(assets).To(HaveLen(2))
			for i, externalID := range []string{"charger-" + mpan, "battery-" + mpan} {
				Expect(assets[i]).To(gstruct.MatchAllKeys(gstruct.Keys{
					"asset_id":       MatchRegexp(`^[0-9a-f-]{36}$`),
					"external_id":    Equal(externalID),
					"asset_created":  BeTrue(),
					"fields_updated": BeEmpty(),
					"warnings":       BeEmpty(),
				}))
			}

			By("storing the site and assets under the ids it answered")
			site := entityStoredSite(Default, ctx, o.Namespace, mpan)
			Expect(site.Labels[flexv1.IDLabel]).To(Equal(siteID))
			Expect(site.Spec.MPAN).To(Equal(mpan))
			Expect(site.Spec.Postcode).To(Equal("SW1A 1AA"))
			Expect(site.Spec.StreetAddress).To(Equal("10 Downing Street"))
			Expect(site.Spec.Email).To(Equal("resident@example.com"))
			Expect(site.Spec.BoundaryMeterConsentAt).NotTo(BeNil())
			Expect(site.Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", time.Date(2026, 1, 15, 10, 30, 0, 0, time.UTC)))
			charger := entityStoredAsset(ctx, o.Namespace, "charger-"+mpan)
			Expect(charger.Labels[flexv1.IDLabel]).To(Equal(assets[0].(map[string]any)["asset_id"]))
			Expect(charger.Spec.SiteName).To(Equal(site.Name))
			Expect(charger.Spec.Type).To(Equal(flexv1.AssetTypeCharger))
			Expect(charger.Spec.Model).To(Equal("zappi"))
			Expect(charger.Spec.InstallationDate).To(Equal("2025-06-15"))
			battery := entityStoredAsset(ctx, o.Namespace, "battery-"+mpan)
			Expect(battery.Labels[flexv1.IDLabel]).To(Equal(assets[1].(map[string]any)["asset_id"]))
			Expect(battery.Spec.SiteName).To(Equal(site.Name))
			Expect(battery.Spec.CapacityWh).To(HaveValue(Equal(int64(13500))))

			By("answering the eligibility record")
			propositionsShape := func(eligible bool, issues ...any) gstruct.Elements {
				byName := gstruct.Elements{}
				for _, p := range allPropositionNames {
					byName[p] = gstruct.MatchAllKeys(gstruct.Keys{
						"proposition": Equal(p), "is_eligible": Equal(eligible), "issues": ConsistOf(issues...)})
				}
				return byName
			}
			byProposition := func(element any) string { return element.(map[string]any)["proposition"].(string) }
			eligibility := body["eligibility"].(map[string]any)
			Expect(eligibility).To(gstruct.MatchAllKeys(gstruct.Keys{
				"site_id":               Equal(siteID),
				"site_properties":       Equal(map[string]any{"has_meter_consent": true, "is_half_hourly_settled": false}),
				"eligible_propositions": ConsistOf("limited_pause", "full_asset_schedule_control", "price_curve"),
				"assets": ConsistOf(
					gstruct.MatchAllKeys(gstruct.Keys{
						"asset_id": Equal(charger.Labels[flexv1.IDLabel]), "external_id": Equal("charger-" + mpan),
						"propositions": gstruct.MatchAllElements(byProposition, propositionsShape(true)),
					}),
					gstruct.MatchAllKeys(gstruct.Keys{
						"asset_id": Equal(battery.Labels[flexv1.IDLabel]), "external_id": Equal("battery-" + mpan),
						"propositions": gstruct.MatchAllElements(byProposition,
							propositionsShape(false, "asset_model_not_set", "asset_installation_date_not_set")),
					}),
				),
			}))

			By("enrolling the site in nothing")
			Expect(entityEnrolmentsOf(Default, ctx, o.Namespace, site.Name)).To(BeEmpty())

			By("answering the same request again with the same ids, creating and changing nothing")
			before := snapshot(Default, ctx, o.Namespace)
			again := entityInitialise(tok, mpan)
			Expect(again["site"]).To(Equal(map[string]any{
				"site_id": siteID, "site_created": false, "fields_updated": []any{}, "warnings": []any{}}))
			Expect(entityAssetIDs(again)).To(Equal(entityAssetIDs(body)))
			for _, a := range again["assets"].([]any) {
				Expect(a.(map[string]any)["asset_created"]).To(BeFalse())
				Expect(a.(map[string]any)["fields_updated"]).To(BeEmpty())
			}
			Expect(again["eligibility"]).To(Equal(body["eligibility"]))
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
			Expect(entityEnrolmentsOf(Default, ctx, o.Namespace, site.Name)).To(BeEmpty())
		})

	It("answers an unknown asset_model with 404 and stores nothing", func(ctx SpecContext) {
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := call("POST", "/entities/site/initialise", tok, entityInitialiseBody("2301234567894", func(b map[string]any) {
			b["assets"].([]any)[0].(map[string]any)["asset_model"] = "no-such-model"
		}))
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(ContainSubstring("no-such-model"))
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})

	DescribeTable("answers malformed input with a 422 validation record and stores nothing",
		func(ctx SpecContext, body any, typ string, loc ...any) {
			before := snapshot(Default, ctx, o.Namespace)
			status, resp := call("POST", "/entities/site/initialise", tok, body)
			entityExpectInvalid(status, resp, typ, loc...)
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		},
		Entry("invalid JSON", raw(`{"site": {`), "json_invalid"),
		Entry("missing site", map[string]any{"assets": []any{map[string]any{"external_id": "x", "type": "charger"}}},
			"missing", "body", "site"),
		Entry("missing assets", entityInitialiseBody("1200000000011", func(b map[string]any) { delete(b, "assets") }),
			"missing", "body", "assets"),
		Entry("no assets", entityInitialiseBody("1200000000011", func(b map[string]any) { b["assets"] = []any{} }),
			"too_short", "body", "assets"),
		Entry("missing mpan", entityInitialiseBody("1200000000011", func(b map[string]any) { delete(b["site"].(map[string]any), "mpan") }),
			"missing", "body", "site", "mpan"),
		Entry("bad MPAN check digit", entityInitialiseBody("1234567890123"), "value_error", "body", "site", "mpan"),
		Entry("missing asset type", entityInitialiseBody("1200000000011", func(b map[string]any) {
			delete(b["assets"].([]any)[1].(map[string]any), "type")
		}), "missing", "body", "assets", 1.0, "type"),
		Entry("naive consent timestamp", entityInitialiseBody("1200000000011", func(b map[string]any) {
			b["site"].(map[string]any)["gave_boundary_meter_consent_at"] = "2026-01-15T10:30:00"
		}), "timezone_aware", "body", "site", "gave_boundary_meter_consent_at"),
	)
})

var _ = Describe("GET /entities/site/{site_id}/eligibility", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("equals the initialise eligibility, follows a change of an asset and agrees with the Site's status", func(ctx SpecContext) {
		const mpan = "2301234567894"
		body := entityInitialise(tok, mpan)
		siteID := entitySiteID(body)
		path := "/entities/site/" + siteID + "/eligibility"

		By("answering exactly what initialise answered")
		// (Read straight after the write, see "reads its own writes" below; here the answer
		// is allowed to settle.)
		Eventually(func(g Gomega) {
			status, resp := call("GET", path, tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			g.Expect(resp.MapG(g)).To(Equal(body["eligibility"]))
		}).Should(Succeed())

		By("agreeing with Site.status once the controller has computed it")
		Eventually(func(g Gomega) {
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
			g.Expect(entityStatusRecord(g, site)).To(Equal(body["eligibility"]))
		}).Should(Succeed())

		By("following a change of the charger's model made outside the API")
		charger := entityStoredAsset(ctx, o.Namespace, "charger-"+mpan)
		patch := client.MergeFrom(charger.DeepCopy())
		charger.Spec.Model = "legacy_charger"
		Expect(k8sClient.Patch(ctx, charger, patch)).To(Succeed())
		var changed map[string]any
		Eventually(func(g Gomega) {
			status, resp := call("GET", path, tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			changed = resp.MapG(g)
			g.Expect(changed["assets"]).To(ContainElement(HaveKeyWithValue("external_id", "charger-"+mpan)), "%v", changed)
			lp := entityPropositionEligibility(entityAssetEligibility(changed, "charger-"+mpan), "limited_pause")
			g.Expect(lp["is_eligible"]).To(BeFalse())
			g.Expect(lp["issues"]).To(ConsistOf("asset_model_enrol_eligibility_override"))
		}).Should(Succeed())
		fasc := entityPropositionEligibility(entityAssetEligibility(changed, "charger-"+mpan), "full_asset_schedule_control")
		Expect(fasc["issues"]).To(ConsistOf("asset_model_not_cop11_qualified"))
		Expect(changed["eligible_propositions"]).To(BeEmpty())
		Expect(changed["site_id"]).To(Equal(siteID))

		By("agreeing with Site.status.eligiblePropositions once the controller catches up")
		Eventually(func(g Gomega) {
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
			g.Expect(site.Status.EligiblePropositions).To(BeEmpty())
			g.Expect(entityStatusRecord(g, site)).To(Equal(mustCallG(g, "GET", path, tok, nil)))
		}).Should(Succeed())
	})

	It("answers a site onboarded with as many assets as one call may carry, listing every one of them", func(ctx SpecContext) {
		// The Site's status must hold them all: a status the API server refuses (it once held
		// 64) leaves the eligibility never current, and this read answering 503 for ever.
		const mpan, count = "1012345678903", app.MaxAssetsPerCall
		body := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) {
			assets := b["assets"].([]any)[:1] // the household's qualifying charger, and batteries
			for i := 1; i < count; i++ {
				assets = append(assets, map[string]any{"external_id": fmt.Sprintf("battery-%02d-%s", i, mpan), "type": "battery",
					"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}})
			}
			b["assets"] = assets
		}))
		siteID := entitySiteID(body)
		Eventually(func(g Gomega) {
			status, resp := call("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			g.Expect(resp.MapG(g)["assets"]).To(HaveLen(count))
		}, "60s").Should(Succeed())
	})

	It("answers an unknown site with 404 and another organisation's site with 404", func(ctx SpecContext) {
		status, resp := call("GET", "/entities/site/"+uuid.NewString()+"/eligibility", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Site not found or not authorized"}))

		siteID := entitySiteID(entityInitialise(tok, "1200000000011"))
		otherTok := newOrg(ctx).token()
		status, resp = call("GET", "/entities/site/"+siteID+"/eligibility", otherTok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Site not found or not authorized"}))
	})
})

var _ = Describe("POST /entities/site/{site_id}/enrol and /unenrol", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})
	enrol := func(siteID string, body any) (int, response) {
		return call("POST", "/entities/site/"+siteID+"/enrol", tok, body)
	}
	unenrol := func(siteID string, body any) (int, response) {
		return call("POST", "/entities/site/"+siteID+"/unenrol", tok, body)
	}
	limitedPause := map[string]any{"proposition": "limited_pause"}

	It("enrols, unenrols recording the withdrawal, and re-enrols only with an override", func(ctx SpecContext) {
		const mpan = "1012345678903"
		siteID := entitySiteID(entityInitialise(tok, mpan))
		siteName := identity.SiteNameForMPAN(mpan)
		key := client.ObjectKey{Namespace: o.Namespace, Name: identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)}

		By("enrolling")
		status, resp := enrol(siteID, limitedPause)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"site_id": siteID, "status": "enrolled"}))
		enrolment := &flexv1.Enrolment{}
		Expect(k8sClient.Get(ctx, key, enrolment)).To(Succeed())
		Expect(enrolment.Spec.SiteName).To(Equal(siteName))
		Expect(enrolment.Spec.Proposition).To(Equal(flexv1.PropositionLimitedPause))
		Expect(enrolment.Spec.OverrideWithdrawal).To(BeFalse())
		entityWaitActive(ctx, key)

		By("saying so when the site already is enrolled")
		status, resp = enrol(siteID, limitedPause)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"site_id": siteID, "status": "already_enrolled"}))
		Expect(entityEnrolmentsOf(Default, ctx, o.Namespace, siteName)).To(HaveLen(1))

		By("unenrolling: the enrolment goes and the withdrawal is recorded on the site")
		status, resp = unenrol(siteID, limitedPause)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"site_id": siteID, "status": "unenrolled"}))
		Eventually(func() error { return k8sClient.Get(ctx, key, &flexv1.Enrolment{}) }).Should(Satisfy(apierrors.IsNotFound))
		site := entityStoredSite(Default, ctx, o.Namespace, mpan)
		withdrawal := householdcore.LastWithdrawal(site, flexv1.PropositionLimitedPause)
		Expect(withdrawal).NotTo(BeNil())
		Expect(withdrawal.WithdrawnAt.Time).To(BeTemporally("~", *clock.Load(), time.Second), "stamped by the API's clock")
		Expect(entityStoredAsset(ctx, o.Namespace, "charger-"+mpan).Spec.SiteName).To(Equal(siteName), "unenrol keeps the assets")

		By("saying so when the site already is unenrolled")
		status, resp = unenrol(siteID, limitedPause)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"site_id": siteID, "status": "already_unenrolled"}))

		By("refusing to re-enrol without an override, changing nothing")
		before := snapshot(Default, ctx, o.Namespace)
		status, resp = enrol(siteID, limitedPause)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		detail, ok := resp.Detail().(map[string]any)
		Expect(ok).To(BeTrue(), "%s", resp)
		Expect(detail).To(gstruct.MatchAllKeys(gstruct.Keys{
			"code":    Equal("previously_withdrew"),
			"message": And(BeAssignableToTypeOf(""), Not(BeEmpty())),
			"eligibility": gstruct.MatchAllKeys(gstruct.Keys{
				"site_id":               Equal(siteID),
				"site_properties":       Equal(map[string]any{"has_meter_consent": true, "is_half_hourly_settled": false}),
				"eligible_propositions": ContainElement("limited_pause"),
				"assets":                HaveLen(2),
			}),
		}))
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

		By("re-enrolling with override_withdrawal")
		status, resp = enrol(siteID, map[string]any{"proposition": "limited_pause", "override_withdrawal": true})
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"site_id": siteID, "status": "enrolled"}))
		Expect(k8sClient.Get(ctx, key, enrolment)).To(Succeed())
		Expect(enrolment.Spec.OverrideWithdrawal).To(BeTrue())
	})

	It("needs boundary meter consent for full_asset_schedule_control and takes it from the enrol request", func(ctx SpecContext) {
		const mpan = "1234567890126"
		siteID := entitySiteID(entityInitialise(tok, mpan, func(b map[string]any) {
			delete(b["site"].(map[string]any), "gave_boundary_meter_consent_at")
		}))
		Expect(entityStoredSite(Default, ctx, o.Namespace, mpan).Spec.BoundaryMeterConsentAt).To(BeNil())

		By("refusing without consent (400), changing nothing")
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := enrol(siteID, map[string]any{"proposition": "full_asset_schedule_control"})
		Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
		Expect(resp.Detail()).To(ContainSubstring("consent"))
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

		By("storing the consent sent with the enrolment and enrolling")
		status, resp = enrol(siteID, map[string]any{"proposition": "full_asset_schedule_control",
			"gave_boundary_meter_consent_at": "2026-03-01T09:00:00+01:00"})
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"site_id": siteID, "status": "enrolled"}))
		site := entityStoredSite(Default, ctx, o.Namespace, mpan)
		Expect(site.Spec.BoundaryMeterConsentAt).NotTo(BeNil())
		Expect(site.Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", time.Date(2026, 3, 1, 8, 0, 0, 0, time.UTC)))
		enrolments := entityEnrolmentsOf(Default, ctx, o.Namespace, site.Name)
		Expect(enrolments).To(HaveLen(1))
		Expect(enrolments[0].Spec.Proposition).To(Equal(flexv1.PropositionFullAssetScheduleControl))
	})

	It("refuses a site that is not eligible with prerequisites_not_met and validates the request", func(ctx SpecContext) {
		const mpan = "1200000000011"
		siteID := entitySiteID(entityInitialise(tok, mpan, func(b map[string]any) {
			b["assets"] = []any{map[string]any{"external_id": "bare-battery", "type": "battery"}}
		}))
		before := snapshot(Default, ctx, o.Namespace)

		By("refusing an ineligible site with the object form and its eligibility")
		status, resp := enrol(siteID, limitedPause)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		detail, ok := resp.Detail().(map[string]any)
		Expect(ok).To(BeTrue(), "%s", resp)
		Expect(detail["code"]).To(Equal("prerequisites_not_met"))
		Expect(detail["message"]).To(ContainSubstring("asset_model_not_set"))
		eligibility := detail["eligibility"].(map[string]any)
		Expect(eligibility["site_id"]).To(Equal(siteID))
		Expect(eligibility["eligible_propositions"]).To(BeEmpty())
		Expect(eligibility["assets"]).To(HaveLen(1))

		By("validating the body")
		status, resp = enrol(siteID, map[string]any{"proposition": "free_money"})
		entityExpectInvalid(status, resp, "enum", "body", "proposition")
		status, resp = enrol(siteID, map[string]any{})
		entityExpectInvalid(status, resp, "missing", "body", "proposition")
		status, resp = enrol(siteID, map[string]any{"proposition": "limited_pause", "override_withdrawal": "yes"})
		entityExpectInvalid(status, resp, "bool_type", "body", "override_withdrawal")
		status, resp = enrol(siteID, map[string]any{"proposition": "limited_pause", "gave_boundary_meter_consent_at": "2026-03-01T09:00:00"})
		entityExpectInvalid(status, resp, "timezone_aware", "body", "gave_boundary_meter_consent_at")
		status, resp = unenrol(siteID, map[string]any{})
		entityExpectInvalid(status, resp, "missing", "body", "proposition")
		status, resp = unenrol(siteID, map[string]any{"proposition": "free_money"})
		entityExpectInvalid(status, resp, "enum", "body", "proposition")

		By("answering an unknown or malformed site id")
		for _, do := range []func(string, any) (int, response){enrol, unenrol} {
			status, resp = do(uuid.NewString(), limitedPause)
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
			status, resp = do("not-a-uuid", limitedPause)
			entityExpectInvalid(status, resp, "uuid_parsing", "path", "site_id")
		}
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})
})

var _ = Describe("Enrolments declared outside the API (GitOps)", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	// declare creates an Enrolment as a GitOps tool would, and waits for the controller (and
	// so the manager's cache) to have seen it and made it active.
	declare := func(ctx context.Context, siteName string) *flexv1.Enrolment {
		e := &flexv1.Enrolment{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: "declared-by-gitops"},
			Spec:       flexv1.EnrolmentSpec{SiteName: siteName, Proposition: flexv1.PropositionLimitedPause},
		}
		Expect(k8sClient.Create(ctx, e)).To(Succeed())
		entityWaitActive(ctx, client.ObjectKeyFromObject(e))
		return e
	}

	// An enrolment declared a moment before (or after) the REST enrol is
	// TestGitOpsEnrolmentMomentsApart's: it needs the Enrolment webhook, which makes the claim
	// each door finds the other's enrolment by, and this suite runs without webhooks.

	It("honours a withdrawal made by deleting the declared enrolment", func(ctx SpecContext) {
		const mpan = "1012345678903"
		siteID := entitySiteID(entityInitialise(tok, mpan))
		declared := declare(ctx, identity.SiteNameForMPAN(mpan))
		Expect(k8sClient.Delete(ctx, declared)).To(Succeed())

		Eventually(func(g Gomega) {
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
			g.Expect(householdcore.LastWithdrawal(site, flexv1.PropositionLimitedPause)).NotTo(BeNil())
		}).Should(Succeed())
		// The controller tells of the withdrawal with an event (the offboard spec relies on
		// its absence).
		Eventually(func(g Gomega) int { return entityWithdrewEvents(ctx, g, o.Namespace) }).Should(Equal(1))

		Eventually(func(g Gomega) {
			status, resp := call("POST", "/entities/site/"+siteID+"/enrol", tok, map[string]any{"proposition": "limited_pause"})
			g.Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			g.Expect(resp.Detail()).To(HaveKeyWithValue("code", "previously_withdrew"))
		}).Should(Succeed())
	})
})

var _ = Describe("GET /entities/site/{site_id}", func() {
	var tok string
	BeforeEach(func(ctx SpecContext) { tok = newOrg(ctx).token() })

	It("answers the legacy site record, 404 for an unknown or foreign site and 422 for a malformed id", func(ctx SpecContext) {
		const mpan = "1234567890126"
		body := entityInitialise(tok, mpan)
		siteID := entitySiteID(body)

		entitySettled(tok, siteID, 2) // read straight after the write: see "reads its own writes"
		record := mustCall("GET", "/entities/site/"+siteID, tok, nil)
		Expect(record).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id":                             Equal(siteID),
			"mpan":                           Equal(mpan),
			"postcode":                       Equal("SW1A 1AA"),
			"address":                        Equal("10 Downing Street"),
			"asset_ids":                      ConsistOf(entityAssetIDs(body)...),
			"markets":                        BeEmpty(),
			"dispatch_methods":               BeEmpty(),
			"gave_boundary_meter_consent_at": Equal("2026-01-15T10:30:00Z"),
		}))
		Expect(record["markets"]).NotTo(BeNil(), "an empty list, not null")
		Expect(record["dispatch_methods"]).NotTo(BeNil(), "an empty list, not null")

		status, resp := call("GET", "/entities/site/"+uuid.NewString(), tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Site not found or not authorized"}))

		status, resp = call("GET", "/entities/site/not-a-uuid", tok, nil)
		entityExpectInvalid(status, resp, "uuid_parsing", "path", "site_id")

		status, resp = call("GET", "/entities/site/"+siteID, newOrg(ctx).token(), nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Site not found or not authorized"}))
	})
})

var _ = Describe("GET /entities/site (list)", func() {
	var tok string
	BeforeEach(func(ctx SpecContext) { tok = newOrg(ctx).token() })
	list := func(query url.Values) map[string]any {
		return mustCall("GET", "/entities/site?"+query.Encode(), tok, nil)
	}
	ids := func(page map[string]any) []any {
		sites := page["sites"].([]any)
		out := make([]any, 0, len(sites))
		for _, s := range sites {
			out = append(out, s.(map[string]any)["id"])
		}
		return out
	}

	It("pages and filters the organisation's sites", func(ctx SpecContext) {
		onboard := func(mpan, postcode string) string {
			return entitySiteID(mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) {
				b["site"].(map[string]any)["postcode"] = postcode
			})))
		}
		// Sites are listed by object name (mpan-<MPAN>): 1012..., 1200..., 2301...
		first := onboard("1012345678903", "EC1A 1BB")
		second := onboard("1200000000011", "SW1A 1AA")
		third := onboard("2301234567894", "EC1A 1BB")
		// Another organisation's site never shows.
		otherTok := newOrg(ctx).token()
		mustCall("POST", "/entities/site/onboard", otherTok, household("1234567890126"))

		By("listing every site on one page")
		var page map[string]any
		Eventually(func(g Gomega) {
			status, resp := call("GET", "/entities/site", tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			page = resp.MapG(g)
			g.Expect(page["total_num_sites"]).To(BeEquivalentTo(3))
			g.Expect(page["sites"]).To(HaveEach(HaveKeyWithValue("asset_ids", HaveLen(2))))
		}).Should(Succeed())
		Expect(page["total_num_pages"]).To(BeEquivalentTo(1))
		Expect(page["page_number"]).To(BeEquivalentTo(1))
		Expect(ids(page)).To(Equal([]any{first, second, third}))
		Expect(page["sites"].([]any)[1]).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": Equal(second), "mpan": Equal("1200000000011"), "postcode": Equal("SW1A 1AA"),
			"address": Equal("10 Downing Street"), "asset_ids": HaveLen(2), "markets": BeEmpty(),
			"dispatch_methods": BeEmpty(), "gave_boundary_meter_consent_at": Equal("2026-01-15T10:30:00Z"),
		}))

		By("paging")
		page = list(url.Values{"limit": {"2"}})
		Expect(page["total_num_sites"]).To(BeEquivalentTo(3))
		Expect(page["total_num_pages"]).To(BeEquivalentTo(2))
		Expect(page["page_number"]).To(BeEquivalentTo(1))
		Expect(ids(page)).To(Equal([]any{first, second}))
		page = list(url.Values{"limit": {"2"}, "offset": {"2"}})
		Expect(page["total_num_pages"]).To(BeEquivalentTo(2))
		Expect(page["page_number"]).To(BeEquivalentTo(2))
		Expect(ids(page)).To(Equal([]any{third}))

		By("filtering by MPAN")
		page = list(url.Values{"mpan": {"1200000000011"}})
		Expect(page["total_num_sites"]).To(BeEquivalentTo(1))
		Expect(ids(page)).To(Equal([]any{second}))
		page = list(url.Values{"mpan": {"1200 0000 00011"}})
		Expect(ids(page)).To(Equal([]any{second}))
		page = list(url.Values{"mpan": {"1234567890126"}})
		Expect(page["total_num_sites"]).To(BeEquivalentTo(0))
		Expect(page["sites"]).To(And(Not(BeNil()), BeEmpty()))

		By("filtering by postcode, normalising its case and spacing")
		for _, pc := range []string{"EC1A 1BB", "ec1a1bb", "ec1a 1bb"} {
			page = list(url.Values{"postcode": {pc}})
			Expect(page["total_num_sites"]).To(BeEquivalentTo(2), "postcode %q", pc)
			Expect(ids(page)).To(Equal([]any{first, third}), "postcode %q", pc)
		}
		page = list(url.Values{"postcode": {"sw1a1aa"}, "mpan": {"1200000000011"}})
		Expect(ids(page)).To(Equal([]any{second}))
	})

	DescribeTable("answers bad paging parameters with a 422 on the query",
		func(query, key, typ string) {
			status, resp := call("GET", "/entities/site?"+query, tok, nil)
			entityExpectInvalid(status, resp, typ, "query", key)
		},
		Entry("limit=0", "limit=0", "limit", "greater_than_equal"),
		Entry("limit=5001", "limit=5001", "limit", "less_than_equal"),
		Entry("offset=-1", "offset=-1", "offset", "greater_than_equal"),
		Entry("limit=x", "limit=x", "limit", "int_parsing"),
		Entry("offset=x", "offset=x", "offset", "int_parsing"),
	)
})

var _ = Describe("POST /entities/site/{site_id}/meter-consent", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("stores the consent and answers the legacy site record", func(ctx SpecContext) {
		const mpan = "1200000000011"
		body := entityInitialise(tok, mpan, func(b map[string]any) {
			delete(b["site"].(map[string]any), "gave_boundary_meter_consent_at")
		})
		siteID := entitySiteID(body)
		path := "/entities/site/" + siteID + "/meter-consent"
		entitySettled(tok, siteID, 2)

		record := mustCall("POST", path, tok, map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T12:00:00+01:00"})
		Expect(record).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": Equal(siteID), "mpan": Equal(mpan), "postcode": Equal("SW1A 1AA"), "address": Equal("10 Downing Street"),
			"asset_ids": ConsistOf(entityAssetIDs(body)...), "markets": BeEmpty(), "dispatch_methods": BeEmpty(),
			"gave_boundary_meter_consent_at": Equal("2026-02-01T11:00:00Z"),
		}))
		site := entityStoredSite(Default, ctx, o.Namespace, mpan)
		Expect(site.Spec.BoundaryMeterConsentAt).NotTo(BeNil())
		Expect(site.Spec.BoundaryMeterConsentAt.Time).To(BeTemporally("==", time.Date(2026, 2, 1, 11, 0, 0, 0, time.UTC)))
		Eventually(func(g Gomega) {
			status, resp := call("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			g.Expect(resp.MapG(g)["site_properties"]).To(HaveKeyWithValue("has_meter_consent", true))
		}).Should(Succeed())

		By("refusing a missing or naive timestamp, changing nothing")
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := call("POST", path, tok, map[string]any{})
		entityExpectInvalid(status, resp, "missing", "body", "gave_boundary_meter_consent_at")
		status, resp = call("POST", path, tok, map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T12:00:00"})
		entityExpectInvalid(status, resp, "timezone_aware", "body", "gave_boundary_meter_consent_at")
		status, resp = call("POST", path, tok, map[string]any{"gave_boundary_meter_consent_at": "yesterday"})
		entityExpectInvalid(status, resp, "datetime_parsing", "body", "gave_boundary_meter_consent_at")
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

		status, resp = call("POST", "/entities/site/"+uuid.NewString()+"/meter-consent", tok,
			map[string]any{"gave_boundary_meter_consent_at": "2026-02-01T12:00:00Z"})
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})
})

// legacyOnboardBody is a request of the deprecated onboard-site-and-asset endpoint.
func legacyOnboardBody(mpan, externalID string) map[string]any {
	return map[string]any{
		"site": map[string]any{"mpan": mpan, "postcode": "sw1a 1aa", "street_address": "1 Legacy Lane",
			"email": "legacy@example.com"},
		"asset":            map[string]any{"external_id": externalID, "type": "charger", "properties": map[string]any{"power_kw": 7, "capacity_kwh": 0.5}},
		"dispatch_consent": map[string]any{"dispatch_methods": []any{"cm_infrequent_dispatch", "limited_pause"}},
	}
}

var _ = Describe("POST /entities/site/onboard-site-and-asset (legacy)", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})
	const path = "/entities/site/onboard-site-and-asset"

	It("creates one site and one asset, records the dispatch consent and enrols; refuses to do it twice", func(ctx SpecContext) {
		const mpan = "2301234567894"
		body := mustCall("POST", path, tok, legacyOnboardBody(mpan, "legacy-1"))
		siteRec := body["site"].(map[string]any)
		assetRec := body["asset"].(map[string]any)
		siteID, _ := siteRec["id"].(string)
		Expect(siteID).To(MatchRegexp(`^[0-9a-f-]{36}$`))
		Expect(assetRec).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": MatchRegexp(`^[0-9a-f-]{36}$`), "external_id": Equal("legacy-1"), "type": Equal("charger"),
			"site_id": Equal(siteID), "properties": Equal(map[string]any{"power_kw": 7.0, "capacity_kwh": 0.5}),
		}))
		Expect(siteRec).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": Equal(siteID), "mpan": Equal(mpan), "postcode": Equal("SW1A 1AA"), "address": Equal("1 Legacy Lane"),
			"asset_ids":        Equal([]any{assetRec["id"]}),
			"markets":          Equal([]any{"cm"}),
			"dispatch_methods": ConsistOf("cm_infrequent_dispatch", "limited_pause"),
		}), "no consent given: gave_boundary_meter_consent_at left out, never null")

		By("storing the site with its dispatch methods and markets, the asset, and an enrolment in limited_pause")
		site := entityStoredSite(Default, ctx, o.Namespace, mpan)
		Expect(site.Labels[flexv1.IDLabel]).To(Equal(siteID))
		Expect(site.Spec.DispatchMethods).To(ConsistOf(flexv1.DispatchMethod("cm_infrequent_dispatch"), flexv1.DispatchMethod("limited_pause")))
		Expect(site.Spec.Markets).To(Equal([]flexv1.Market{"cm"}))
		Expect(site.Spec.Email).To(Equal("legacy@example.com"))
		asset := entityStoredAsset(ctx, o.Namespace, "legacy-1")
		Expect(asset.Labels[flexv1.IDLabel]).To(Equal(assetRec["id"]))
		Expect(asset.Spec.SiteName).To(Equal(site.Name))
		Expect(asset.Spec.Type).To(Equal(flexv1.AssetTypeCharger))
		Expect(asset.Spec.PowerW).To(HaveValue(Equal(int64(7000))))
		enrolments := entityEnrolmentsOf(Default, ctx, o.Namespace, site.Name)
		Expect(enrolments).To(HaveLen(1))
		Expect(enrolments[0].Spec.Proposition).To(Equal(flexv1.PropositionLimitedPause))

		By("refusing the same request again with 409, changing nothing")
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := call("POST", path, tok, legacyOnboardBody(mpan, "legacy-1"))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))

		By("refusing an existing site with a new asset, and a new site with an asset used elsewhere in the organisation")
		status, resp = call("POST", path, tok, legacyOnboardBody(mpan, "legacy-2"))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		status, resp = call("POST", path, tok, legacyOnboardBody("1012345678903", "legacy-1"))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})

	DescribeTable("answers malformed input with a 422 and stores nothing",
		func(ctx SpecContext, mutate func(map[string]any), typ string, loc ...any) {
			body := legacyOnboardBody("1200000000011", "legacy-x")
			mutate(body)
			status, resp := call("POST", path, tok, body)
			entityExpectInvalid(status, resp, typ, loc...)
			Expect(snapshot(Default, ctx, o.Namespace)).To(BeEmpty())
		},
		Entry("missing dispatch_consent", func(b map[string]any) { delete(b, "dispatch_consent") },
			"missing", "body", "dispatch_consent"),
		Entry("missing dispatch_methods", func(b map[string]any) { b["dispatch_consent"] = map[string]any{} },
			"missing", "body", "dispatch_consent", "dispatch_methods"),
		Entry("unknown dispatch method", func(b map[string]any) {
			b["dispatch_consent"] = map[string]any{"dispatch_methods": []any{"teleport", "limited_pause"}}
		}, "enum", "body", "dispatch_consent", "dispatch_methods", 0.0),
		Entry("unknown dispatch method after a known one", func(b map[string]any) {
			b["dispatch_consent"] = map[string]any{"dispatch_methods": []any{"limited_pause", "teleport"}}
		}, "enum", "body", "dispatch_consent", "dispatch_methods", 1.0),
		Entry("missing asset", func(b map[string]any) { delete(b, "asset") }, "missing", "body", "asset"),
		Entry("missing site", func(b map[string]any) { delete(b, "site") }, "missing", "body", "site"),
		Entry("asset without external_id", func(b map[string]any) { delete(b["asset"].(map[string]any), "external_id") },
			"missing", "body", "asset", "external_id"),
	)
})

var _ = Describe("POST /entities/site/{site_id}/offboard-site-and-assets", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("answers the site's first registered asset, whatever the order of names", func(ctx SpecContext) {
		const mpan = "1012345678903"
		// "zz-first" sorts after "aa-second" by name but is registered a second earlier
		// (creation times are kept to the second).
		body := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) {
			b["assets"] = []any{map[string]any{"external_id": "zz-first", "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15"}}
		}))
		siteID := entitySiteID(body)
		first := entityStoredAsset(ctx, o.Namespace, "zz-first").CreationTimestamp
		Eventually(func() int64 { return time.Now().Unix() }, "3s", "20ms").Should(BeNumerically(">", first.Unix()),
			"a second registered after the first asset's")
		mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": "aa-second", "type": "battery", "site_id": siteID})
		Expect(entityStoredAsset(ctx, o.Namespace, "aa-second").CreationTimestamp.After(first.Time)).To(BeTrue(),
			"the second asset registered a second later")

		resp := mustCall("POST", "/entities/site/"+siteID+"/offboard-site-and-assets", tok, nil)
		Expect(resp["asset"]).To(HaveKeyWithValue("external_id", "zz-first"))
		Expect(resp["site"]).To(HaveKeyWithValue("asset_ids", HaveLen(2)))
	})

	It("deletes the site and everything of it without recording a withdrawal, and leaves other sites alone", func(ctx SpecContext) {
		const mpan, otherMPAN = "1200000000011", "2301234567894"
		body := mustCall("POST", "/entities/site/onboard", tok, household(mpan))
		siteID := entitySiteID(body)
		siteName := identity.SiteNameForMPAN(mpan)
		other := mustCall("POST", "/entities/site/onboard", tok, household(otherMPAN))
		otherName := identity.SiteNameForMPAN(otherMPAN)
		// Active enrolments: deleting one of them would be a withdrawal, were the site staying.
		enrolmentKey := client.ObjectKey{Namespace: o.Namespace, Name: identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)}
		otherEnrolmentKey := client.ObjectKey{Namespace: o.Namespace, Name: identity.EnrolmentName(otherName, flexv1.PropositionLimitedPause)}
		entityWaitActive(ctx, enrolmentKey)
		entityWaitActive(ctx, otherEnrolmentKey)
		ledger := &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)},
			Spec: flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: []flexv1.RewardTransaction{
				{ID: uuid.NewString(), Type: "flex event", CreditPence: 120}}},
		}
		Expect(k8sClient.Create(ctx, ledger)).To(Succeed())
		otherBefore := entityLinesWithout(snapshot(Default, ctx, o.Namespace), siteName)
		Expect(otherBefore).To(ContainSubstring(otherName))

		By("answering the site and an asset as they were")
		resp := mustCall("POST", "/entities/site/"+siteID+"/offboard-site-and-assets", tok, nil)
		Expect(resp["site"]).To(gstruct.MatchKeys(gstruct.IgnoreExtras, gstruct.Keys{
			"id": Equal(siteID), "mpan": Equal(mpan), "postcode": Equal("SW1A 1AA"), "address": Equal("10 Downing Street"),
			"asset_ids": ConsistOf(entityAssetIDs(body)...), "gave_boundary_meter_consent_at": Equal("2026-01-15T10:30:00Z"),
			"markets": BeEmpty(), "dispatch_methods": BeEmpty(),
		}))
		Expect(resp["asset"]).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id":                    BeElementOf(entityAssetIDs(body)...),
			"external_id":           BeElementOf("charger-"+mpan, "battery-"+mpan),
			"type":                  BeElementOf("charger", "battery"),
			"site_id":               Equal(siteID),
			"properties":            HaveKey("power_kw"),
			"needs_reauthorisation": BeFalse(),
		}))

		By("answering a repeated offboard while the site is being deleted with 200 or 404, never 500")
		status, again := call("POST", "/entities/site/"+siteID+"/offboard-site-and-assets", tok, nil)
		Expect(status).To(BeElementOf(http.StatusOK, http.StatusNotFound), "%s", again)

		By("deleting the site, its assets, enrolments and reward ledger, with no withdrawal on record")
		sawWithdrawal := false
		Eventually(func(g Gomega) {
			site := &flexv1.Site{}
			err := k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: siteName}, site)
			if err == nil && len(site.Status.EnrolmentHistory) > 0 {
				sawWithdrawal = true
			}
			g.Expect(err).To(Satisfy(apierrors.IsNotFound))
		}).Should(Succeed())
		Expect(sawWithdrawal).To(BeFalse(), "offboarding recorded a withdrawal on the departing site")
		Eventually(func(g Gomega) {
			assets := &flexv1.AssetList{}
			g.Expect(k8sClient.List(ctx, assets, client.InNamespace(o.Namespace))).To(Succeed())
			for _, a := range assets.Items {
				g.Expect(a.Spec.SiteName).NotTo(Equal(siteName))
			}
			g.Expect(entityEnrolmentsOf(g, ctx, o.Namespace, siteName)).To(BeEmpty())
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(ledger), &flexv1.RewardLedger{})).To(Satisfy(apierrors.IsNotFound))
		}).Should(Succeed())
		Consistently(func(g Gomega) int { return entityWithdrewEvents(ctx, g, o.Namespace) }, "2s", "200ms").Should(BeZero())

		By("answering 404 for the site afterwards")
		status, gone := call("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", gone)
		Expect(gone.Map()).To(Equal(map[string]any{"detail": "Site not found or not authorized"}))
		status, gone = call("POST", "/entities/site/"+siteID+"/offboard-site-and-assets", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", gone)

		By("leaving the other site of the organisation untouched")
		Expect(entityLinesWithout(snapshot(Default, ctx, o.Namespace), siteName)).To(Equal(otherBefore))
		entityWaitActive(ctx, otherEnrolmentKey)
		record := mustCall("GET", "/entities/site/"+entitySiteID(other), tok, nil)
		Expect(record["asset_ids"]).To(ConsistOf(entityAssetIDs(other)...))
	})

	It("onboards a household again straight after its offboard, while its old site is still being deleted: 200 with a new site, never 503",
		func(ctx SpecContext) {
			const mpan = "1200000000011"
			first := mustCall("POST", "/entities/site/onboard", tok, household(mpan))
			firstID := entitySiteID(first)
			oldName := identity.SiteNameForMPAN(mpan)
			entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.EnrolmentName(oldName, flexv1.PropositionLimitedPause)})
			// Another finalizer keeps the old site while it is deleted, as a slow one does (a
			// provider revoking a device connection's tokens): the old site outlives any retry.
			const hold = "example.com/held-by-test"
			old := &flexv1.Site{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: oldName}, old)).To(Succeed())
			patch := client.MergeFrom(old.DeepCopy())
			old.Finalizers = append(old.Finalizers, hold)
			Expect(k8sClient.Patch(ctx, old, patch)).To(Succeed())
			mustCall("POST", "/entities/site/"+firstID+"/offboard-site-and-assets", tok, nil)

			By("onboarding the household that left, at once")
			status, again := call("POST", "/entities/site/onboard", tok, household(mpan))
			Expect(status).To(Equal(http.StatusOK), "%s", again)
			againID := entitySiteID(again.Map())
			Expect(againID).NotTo(Equal(firstID), "a new site, not the one that left")

			By("serving the new site and its eligibility, and not the old one")
			eligible := func(g Gomega) {
				status, body, err := testenv.Call(apiServer.URL, "GET", "/entities/site/"+againID+"/eligibility", tok, nil)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(status).To(Equal(http.StatusOK), "%s", body)
				g.Expect(response(body).Map()["assets"]).To(HaveLen(2))
			}
			Eventually(eligible).Should(Succeed())
			status, gone := call("GET", "/entities/site/"+firstID, tok, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s", gone)
			page := mustCall("GET", "/entities/site?mpan="+mpan, tok, nil)
			Expect(page["sites"]).To(ConsistOf(HaveKeyWithValue("id", againID)))

			By("keeping the new site once the old one is gone, and refusing a second site for the MPAN")
			// Under an optimistic lock, from a fresh read: the Site controller may release its own
			// finalizer meanwhile, and a list written from an older read would add it back.
			Eventually(func(g Gomega) {
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: oldName}, old)).To(Succeed())
				patch := client.MergeFromWithOptions(old.DeepCopy(), client.MergeFromWithOptimisticLock{})
				old.Finalizers = slices.DeleteFunc(old.Finalizers, func(f string) bool { return f == hold })
				g.Expect(k8sClient.Patch(ctx, old, patch)).To(Succeed())
			}).Should(Succeed())
			Eventually(func() error {
				return k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: oldName}, &flexv1.Site{})
			}).Should(Satisfy(apierrors.IsNotFound))
			Eventually(eligible).Should(Succeed())
			Expect(mustCall("POST", "/entities/site/onboard", tok, household(mpan))["site"]).
				To(HaveKeyWithValue("site_id", againID), "the same household onboarded again is the new site")
			status, resp := call("POST", "/entities/site", tok, map[string]any{"mpan": mpan, "postcode": "SW1A 1AA",
				"street_address": "11 Downing Street"})
			Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		})

	It("answers an unknown site with 404 and a malformed id with 422", func() {
		status, resp := call("POST", "/entities/site/"+uuid.NewString()+"/offboard-site-and-assets", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Site not found or not authorized"}))
		status, resp = call("POST", "/entities/site/not-a-uuid/offboard-site-and-assets", tok, nil)
		entityExpectInvalid(status, resp, "uuid_parsing", "path", "site_id")
	})
})

var _ = Describe("Reads after writes", func() {
	var tok string
	BeforeEach(func(ctx SpecContext) { tok = newOrg(ctx).token() })

	It("reads its own writes: site, eligibility and asset reads straight after an initialise answer what it wrote", func() {
		// A client that initialises and then reads must see what it wrote. Several sites, as
		// a read that lags the write does not happen every time.
		var problems []string
		for i := range 20 {
			mpan := validMPAN(i)
			body := entityInitialise(tok, mpan)
			siteID := entitySiteID(body)
			assetIDs := entityAssetIDs(body)

			record := mustCall("GET", "/entities/site/"+siteID, tok, nil)
			if got := record["asset_ids"].([]any); len(got) != len(assetIDs) {
				problems = append(problems, fmt.Sprintf("GET site %s: asset_ids %v, want %v", mpan, got, assetIDs))
			}
			eligibility := mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
			if got := eligibility["assets"].([]any); len(got) != len(assetIDs) {
				problems = append(problems, fmt.Sprintf("GET eligibility %s: %d assets, want %d", mpan, len(got), len(assetIDs)))
			}
			asset := mustCall("GET", "/entities/asset/"+assetIDs[1].(string), tok, nil)
			if asset["site_id"] != siteID {
				problems = append(problems, fmt.Sprintf("GET asset of %s: site_id %q, want %q", mpan, asset["site_id"], siteID))
			}
		}
		Expect(problems).To(BeEmpty())
	})
})
