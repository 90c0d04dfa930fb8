package server_test

import (
	"context"
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	householdcore "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
)

// Specs of the asset lifecycle after creation (docs/api.md, "The site and asset
// lifecycle"): PATCH and DELETE /entities/asset/{asset_id} and GET /entities/asset. Each spec
// runs in an organisation of its own and checks what is stored, not only the answer.

// lifecycleAssetID is the API id of the stored asset with externalID.
func lifecycleAssetID(ctx context.Context, ns, externalID string) string {
	GinkgoHelper()
	return entityStoredAsset(ctx, ns, externalID).Labels[flexv1.IDLabel]
}

// lifecycleSettledAsset waits until the controllers are done with the asset (its status is
// observed and Ready, and stays as it is), and returns it: a write seen after this is a write
// of the request under test.
func lifecycleSettledAsset(ctx context.Context, ns, externalID string) *flexv1.Asset {
	GinkgoHelper()
	var asset *flexv1.Asset
	Eventually(func(g Gomega) {
		asset = &flexv1.Asset{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.AssetName(externalID)}, asset)).To(Succeed())
		g.Expect(asset.Status.ObservedGeneration).To(Equal(asset.Generation))
		g.Expect(meta.IsStatusConditionTrue(asset.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
	}).Should(Succeed())
	Consistently(func(g Gomega) string {
		current := &flexv1.Asset{}
		g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(asset), current)).To(Succeed())
		return current.ResourceVersion
	}, time.Second, 100*time.Millisecond).Should(Equal(asset.ResourceVersion))
	return asset
}

// lifecycleEnrolment reads a site's enrolment in a proposition straight from the API server.
func lifecycleEnrolment(ctx context.Context, g Gomega, ns, mpan string, p flexv1.PropositionName) *flexv1.Enrolment {
	e := &flexv1.Enrolment{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.EnrolmentName(identity.SiteNameForMPAN(mpan), p)},
		e)).To(Succeed())
	return e
}

// lifecycleEvents counts the Events of a namespace with reason about the named object.
func lifecycleEvents(ctx context.Context, g Gomega, ns, reason, name string) int {
	events := &eventsv1.EventList{}
	g.Expect(k8sClient.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	n := 0
	for _, e := range events.Items {
		if e.Reason == reason && e.Regarding.Name == name {
			n++
		}
	}
	return n
}

var _ = Describe("PATCH /entities/asset/{asset_id}", func() {
	var (
		o         org
		tok       string
		siteID    string
		batteryID string
	)
	const mpan = "1200000000011"
	battery := "battery-" + mpan
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
		siteID = entitySiteID(entityInitialise(tok, mpan))
		batteryID = lifecycleAssetID(ctx, o.Namespace, battery)
	})
	patchPath := func(id string) string { return "/entities/asset/" + id }

	It("changes only what is sent, keeps everything else, and answers the asset record", func(ctx SpecContext) {
		By("changing one property: the other property and the other fields stay")
		record := mustCall("PATCH", patchPath(batteryID), tok, map[string]any{"properties": map[string]any{"capacity_kwh": 9.5}})
		Expect(record).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": Equal(batteryID), "external_id": Equal(battery), "type": Equal("battery"), "site_id": Equal(siteID),
			"properties":            Equal(map[string]any{"power_kw": 5.0, "capacity_kwh": 9.5}),
			"needs_reauthorisation": BeFalse(),
		}))
		stored := entityStoredAsset(ctx, o.Namespace, battery)
		Expect(stored.Spec).To(gstruct.MatchAllFields(gstruct.Fields{
			"SiteName": Equal(identity.SiteNameForMPAN(mpan)), "ExternalID": Equal(battery), "Type": Equal(flexv1.AssetTypeBattery),
			"Model": BeEmpty(), "InstallationDate": BeEmpty(), "SerialNumber": BeEmpty(),
			"PowerW": HaveValue(Equal(int64(5000))), "CapacityWh": HaveValue(Equal(int64(9500))), "CustomDispatchPowerW": BeNil(),
		}))

		By("filling in the model and the installation date: the properties stay")
		record = mustCall("PATCH", patchPath(batteryID), tok,
			map[string]any{"asset_model": "givenergy_all_in_one", "installation_date": "2025-03-01"})
		Expect(record["properties"]).To(Equal(map[string]any{"power_kw": 5.0, "capacity_kwh": 9.5}))
		stored = entityStoredAsset(ctx, o.Namespace, battery)
		Expect(stored.Spec.Model).To(Equal("givenergy_all_in_one"))
		Expect(stored.Spec.InstallationDate).To(Equal("2025-03-01"))
		Expect(*stored.Spec.PowerW).To(Equal(int64(5000)))
		Expect(*stored.Spec.CapacityWh).To(Equal(int64(9500)))

		By("answering what a read answers, straight away")
		Expect(mustCall("GET", patchPath(batteryID), tok, nil)).To(Equal(record))

		By("making the battery eligible, in the API's eligibility and in Site.status")
		eligible := func(g Gomega, rec map[string]any) {
			// The Site's status may not list the asset yet: retry (entityAssetEligibility fails at once).
			g.Expect(rec["assets"]).To(ContainElement(HaveKeyWithValue("external_id", battery)), "%v", rec)
			g.Expect(entityAssetEligibility(rec, battery)["propositions"]).To(HaveEach(HaveKeyWithValue("is_eligible", true)))
		}
		eligible(Default, mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil))
		Eventually(func(g Gomega) {
			eligible(g, entityStatusRecord(g, entityStoredSite(g, ctx, o.Namespace, mpan)))
		}).Should(Succeed())

		By("never clearing a field: null, empty strings and an empty properties object keep what is stored")
		before := entityStoredAsset(ctx, o.Namespace, battery)
		record = mustCall("PATCH", patchPath(batteryID), tok, map[string]any{"asset_model": "", "installation_date": nil,
			"properties": map[string]any{"power_kw": nil}})
		Expect(record["properties"]).To(Equal(map[string]any{"power_kw": 5.0, "capacity_kwh": 9.5}))
		Expect(entityStoredAsset(ctx, o.Namespace, battery).Spec).To(Equal(before.Spec))

		By("ignoring fields it does not take (the type and the site are the asset's identity)")
		mustCall("PATCH", patchPath(batteryID), tok, map[string]any{"type": "charger", "site_id": uuid.NewString(),
			"external_id": "renamed", "serial_number": "SN-1"})
		Expect(entityStoredAsset(ctx, o.Namespace, battery).Spec).To(Equal(before.Spec))
	})

	It("writes nothing when nothing changes", func(ctx SpecContext) {
		mustCall("PATCH", patchPath(batteryID), tok, map[string]any{"asset_model": "givenergy_all_in_one"})
		before := lifecycleSettledAsset(ctx, o.Namespace, battery)
		for _, body := range []map[string]any{
			{},
			{"properties": map[string]any{}},
			{"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}},
			{"properties": map[string]any{"power_kw": 5.0004}}, // the same whole watt
			{"asset_model": "givenergy_all_in_one"},
			{"asset_model": nil, "installation_date": nil, "properties": nil},
		} {
			record := mustCall("PATCH", patchPath(batteryID), tok, body)
			Expect(record["id"]).To(Equal(batteryID))
			Expect(record["properties"]).To(Equal(map[string]any{"power_kw": 5.0, "capacity_kwh": 13.5}))
			after := entityStoredAsset(ctx, o.Namespace, battery)
			Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "body %v wrote", body)
			Expect(after.Generation).To(Equal(before.Generation))
		}
	})

	It("answers an unknown asset, another organisation's asset and an unknown asset model with 404, and stores nothing",
		func(ctx SpecContext) {
			before := snapshot(Default, ctx, o.Namespace)
			status, resp := call("PATCH", patchPath(uuid.NewString()), tok, map[string]any{"asset_model": "zappi"})
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
			Expect(resp.Map()).To(Equal(map[string]any{"detail": "Asset not found or not authorized"}))

			status, resp = call("PATCH", patchPath(batteryID), tok, map[string]any{"asset_model": "no-such-model"})
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
			Expect(resp.Detail()).To(ContainSubstring("no-such-model"))

			other := newOrg(ctx)
			status, resp = call("PATCH", patchPath(batteryID), other.token(), map[string]any{"asset_model": "givenergy_all_in_one"})
			Expect(status).To(Equal(http.StatusNotFound), "another organisation: 404, not 403: %s", resp)
			Expect(resp.Map()).To(Equal(map[string]any{"detail": "Asset not found or not authorized"}))
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
			Expect(snapshot(Default, ctx, other.Namespace)).To(BeEmpty())
		})

	DescribeTable("answers malformed input with a 422 validation record and stores nothing",
		func(ctx SpecContext, id string, body any, typ string, loc ...any) {
			if id == "" {
				id = batteryID
			}
			before := snapshot(Default, ctx, o.Namespace)
			status, resp := call("PATCH", patchPath(id), tok, body)
			entityExpectInvalid(status, resp, typ, loc...)
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		},
		Entry("asset_id not a uuid", "battery-1", map[string]any{}, "uuid_parsing", "path", "asset_id"),
		Entry("not JSON", "", raw(`{"asset_model":`), "json_invalid"),
		Entry("not an object", "", []any{"zappi"}, "model_attributes_type", "body"),
		Entry("negative power", "", map[string]any{"properties": map[string]any{"power_kw": -1}},
			"greater_than_equal", "body", "properties", "power_kw"),
		Entry("capacity not a number", "", map[string]any{"properties": map[string]any{"capacity_kwh": "13.5 kWh"}},
			"float_type", "body", "properties", "capacity_kwh"),
		Entry("properties not an object", "", map[string]any{"properties": []any{5}},
			"model_attributes_type", "body", "properties"),
		Entry("asset_model not a string", "", map[string]any{"asset_model": 7}, "string_type", "body", "asset_model"),
		Entry("asset_model too long", "", map[string]any{"asset_model": strings.Repeat("m", 257)},
			"string_too_long", "body", "asset_model"),
		Entry("installation_date in the future", "", map[string]any{"installation_date": "2999-01-01"},
			"value_error", "body", "installation_date"),
		Entry("installation_date not a date", "", map[string]any{"installation_date": "01/03/2025"},
			"date_parsing", "body", "installation_date"),
		// An empty installation_date is not a date: the same 422 as every door that takes one.
		Entry("installation_date empty", "", map[string]any{"installation_date": ""},
			"date_parsing", "body", "installation_date"),
	)

	It("names every problem at once: the path's and the body's", func() {
		status, resp := call("PATCH", patchPath("nope"), tok, map[string]any{"properties": map[string]any{"power_kw": -1}})
		entityExpectInvalid(status, resp, "uuid_parsing", "path", "asset_id")
		entityExpectInvalid(status, resp, "greater_than_equal", "body", "properties", "power_kw")
		status, resp = call("PATCH", patchPath("nope"), tok, raw(`{`))
		entityExpectInvalid(status, resp, "uuid_parsing", "path", "asset_id")
		entityExpectInvalid(status, resp, "json_invalid")
	})
})

var _ = Describe("DELETE /entities/asset/{asset_id}", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("deletes the asset: 204 without a body, then it is gone everywhere and a repeat is a 404", func(ctx SpecContext) {
		const mpan = "2301234567894"
		siteID := entitySiteID(entityInitialise(tok, mpan))
		batteryID := lifecycleAssetID(ctx, o.Namespace, "battery-"+mpan)
		chargerID := lifecycleAssetID(ctx, o.Namespace, "charger-"+mpan)

		status, resp := call("DELETE", "/entities/asset/"+batteryID, tok, nil)
		Expect(status).To(Equal(http.StatusNoContent))
		Expect(resp.String()).To(BeEmpty())

		By("reading it as gone straight away, through every read")
		status, _ = call("GET", "/entities/asset/"+batteryID, tok, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _ = call("GET", "/entities/asset/external-id/battery-"+mpan, tok, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(mustCall("GET", "/entities/site/"+siteID, tok, nil)["asset_ids"]).To(Equal([]any{chargerID}))
		eligibility := mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
		Expect(eligibility["assets"]).To(HaveLen(1))
		Expect(entityAssetEligibility(eligibility, "charger-"+mpan)).NotTo(BeNil())
		err := k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.AssetName("battery-" + mpan)}, &flexv1.Asset{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Asset object is deleted: %v", err)

		By("answering a repeat with 404")
		status, resp = call("DELETE", "/entities/asset/"+batteryID, tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Asset not found or not authorized"}))

		By("letting the external id be registered again, as a new asset")
		created := mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": "battery-" + mpan, "type": "battery",
			"site_id": siteID})
		Expect(created["id"]).NotTo(Equal(batteryID))
	})

	It("makes the site's eligibility and the enrolment follow when the last eligible asset goes", func(ctx SpecContext) {
		const mpan = "1012345678903"
		siteName := identity.SiteNameForMPAN(mpan)
		siteID := entitySiteID(mustCall("POST", "/entities/site/onboard", tok, household(mpan)))
		enrolmentName := identity.EnrolmentName(siteName, flexv1.PropositionLimitedPause)
		entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace, Name: enrolmentName})
		Eventually(func(g Gomega) []flexv1.PropositionName {
			return entityStoredSite(g, ctx, o.Namespace, mpan).Status.EligiblePropositions
		}).Should(ContainElement(flexv1.PropositionLimitedPause))

		By("deleting the charger, the site's only eligible asset (the battery has no model)")
		status, resp := call("DELETE", "/entities/asset/"+lifecycleAssetID(ctx, o.Namespace, "charger-"+mpan), tok, nil)
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		deleted := time.Now()

		By("answering the new eligibility straight away")
		eligibility := mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
		Expect(eligibility["eligible_propositions"]).To(BeEmpty())
		Expect(eligibility["assets"]).To(HaveLen(1))

		By("writing it into Site.status within seconds")
		Eventually(func(g Gomega) {
			site := entityStoredSite(g, ctx, o.Namespace, mpan)
			g.Expect(site.Status.EligiblePropositions).To(BeEmpty())
			g.Expect(site.Status.Assets).To(HaveLen(1))
			cond := meta.FindStatusCondition(site.Status.Conditions, flexv1.EligibleCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Reason).To(Equal(flexv1.ReasonNotEligible))
			g.Expect(entityStatusRecord(g, site)).To(Equal(eligibility))
		}).WithTimeout(10 * time.Second).Should(Succeed())

		By("reporting the enrolment as no longer eligible, not keeping it Active")
		Eventually(func(g Gomega) {
			e := lifecycleEnrolment(ctx, g, o.Namespace, mpan, flexv1.PropositionLimitedPause)
			g.Expect(e.Status.Phase).To(Equal(flexv1.EnrolmentNotEligible))
			g.Expect(meta.IsStatusConditionFalse(e.Status.Conditions, flexv1.ReadyCondition)).To(BeTrue())
			g.Expect(meta.IsStatusConditionTrue(e.Status.Conditions, flexv1.StalledCondition)).To(BeTrue())
			g.Expect(meta.FindStatusCondition(e.Status.Conditions, flexv1.StalledCondition).Reason).To(Equal(flexv1.ReasonNotEligible))
		}).WithTimeout(10 * time.Second).Should(Succeed())
		followed := time.Since(deleted)
		Eventually(func(g Gomega) int {
			return lifecycleEvents(ctx, g, o.Namespace, flexv1.ReasonNotEligible, enrolmentName)
		}).Should(BeNumerically(">=", 1), "a Warning Event tells that the enrolment stopped being active")
		GinkgoWriter.Printf("FIGURES delete-asset: site status and enrolment phase followed within %.2fs\n", followed.Seconds())

		By("reporting a site whose last asset goes as having no assets; an enrol is refused")
		status, resp = call("DELETE", "/entities/asset/"+lifecycleAssetID(ctx, o.Namespace, "battery-"+mpan), tok, nil)
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		Expect(mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)["assets"]).To(BeEmpty())
		Eventually(func(g Gomega) {
			site := entityStoredSite(g, ctx, o.Namespace, mpan)
			g.Expect(meta.FindStatusCondition(site.Status.Conditions, flexv1.EligibleCondition).Reason).To(Equal(flexv1.ReasonNoAssets))
			e := lifecycleEnrolment(ctx, g, o.Namespace, mpan, flexv1.PropositionLimitedPause)
			g.Expect(e.Status.Phase).To(Equal(flexv1.EnrolmentNotEligible))
		}).Should(Succeed())
		status, resp = call("POST", "/entities/site/"+siteID+"/enrol", tok, map[string]any{"proposition": "price_curve"})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.Detail()).To(HaveKeyWithValue("code", "prerequisites_not_met"))

		By("bringing the enrolment back once an eligible asset is registered again")
		mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": "charger-2", "type": "charger", "site_id": siteID,
			"asset_model": "zappi", "installation_date": "2025-06-15"})
		Eventually(func(g Gomega) flexv1.EnrolmentPhase {
			return lifecycleEnrolment(ctx, g, o.Namespace, mpan, flexv1.PropositionLimitedPause).Status.Phase
		}).Should(Equal(flexv1.EnrolmentActive))
	})

	It("answers an unknown asset, another organisation's asset with 404 and a malformed id with 422", func(ctx SpecContext) {
		const mpan = "1200000000011"
		entityInitialise(tok, mpan)
		chargerID := lifecycleAssetID(ctx, o.Namespace, "charger-"+mpan)
		before := snapshot(Default, ctx, o.Namespace)

		status, resp := call("DELETE", "/entities/asset/"+uuid.NewString(), tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Asset not found or not authorized"}))

		status, resp = call("DELETE", "/entities/asset/"+chargerID, newOrg(ctx).token(), nil)
		Expect(status).To(Equal(http.StatusNotFound), "another organisation: 404, not 403: %s", resp)
		Expect(resp.Map()).To(Equal(map[string]any{"detail": "Asset not found or not authorized"}))

		status, resp = call("DELETE", "/entities/asset/charger-"+mpan, tok, nil)
		entityExpectInvalid(status, resp, "uuid_parsing", "path", "asset_id")
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})

	It("does not take a site whose request is still writing it for abandoned when one of its assets goes", func(ctx SpecContext) {
		// A site as a request that creates it writes it: marked in flight, naming two assets.
		// The first exists, the second is still being written. Deleting the first must not
		// leave the Site controller waiting for it until the deadline, then deleting the site.
		const mpan = "1234567890126"
		const inFlight = 4 * time.Second
		siteName := identity.SiteNameForMPAN(mpan)
		site := householdcore.NewSite(o.Namespace, siteName)
		site.Spec.MPAN, site.Spec.Postcode = mpan, "SW1A 1AA"
		first := householdcore.NewAsset(site, "first-"+mpan, flexv1.AssetTypeBattery) // site not stored yet: no controller
		second := householdcore.NewAsset(site, "second-"+mpan, flexv1.AssetTypeBattery)
		householdcore.InFlight{Until: time.Now().Add(inFlight), Assets: []string{first.Name, second.Name}}.Mark(site)
		Expect(k8sClient.Create(ctx, site)).To(Succeed())
		Expect(k8sClient.Create(ctx, first)).To(Succeed())
		// The REST API finds assets in its cache: wait for it to see the one made as kubectl would.
		Eventually(func() error { return serverCache.Get(ctx, client.ObjectKeyFromObject(first), &flexv1.Asset{}) }).Should(Succeed())

		status, resp := call("DELETE", "/entities/asset/"+first.Labels[flexv1.IDLabel], tok, nil)
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		Expect(k8sClient.Create(ctx, second)).To(Succeed())

		By("evaluating the site once the rest of it is written")
		Eventually(func(g Gomega) {
			stored := entityStoredSite(g, ctx, o.Namespace, mpan)
			g.Expect(stored.Status.ObservedGeneration).To(BeNumerically(">", 0))
			g.Expect(stored.Status.Assets).To(ConsistOf(HaveField("Name", second.Name)))
		}).Should(Succeed())
		By("keeping the site past the request's deadline")
		Consistently(func(g Gomega) {
			stored := entityStoredSite(g, ctx, o.Namespace, mpan)
			g.Expect(stored.DeletionTimestamp.IsZero()).To(BeTrue())
		}, inFlight+2*time.Second, 250*time.Millisecond).Should(Succeed())
		Expect(lifecycleEvents(ctx, Default, o.Namespace, "AbandonedOnboard", siteName)).To(BeZero())
	})
})

var _ = Describe("GET /entities/asset (list)", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})
	list := func(query string) map[string]any { return mustCall("GET", "/entities/asset?"+query, tok, nil) }
	ids := func(page map[string]any) []string {
		assets := page["assets"].([]any)
		out := make([]string, 0, len(assets))
		for _, a := range assets {
			out = append(out, a.(map[string]any)["id"].(string))
		}
		return out
	}

	It("pages through the organisation's assets in a stable order, and only them", func(ctx SpecContext) {
		first := entitySiteID(entityInitialise(tok, "1200000000011"))
		entityInitialise(tok, "2301234567894")
		mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": "heat-pump-9", "type": "heat pump", "site_id": first})
		// Another organisation's assets never show.
		entityInitialise(newOrg(ctx).token(), "1012345678903")

		// The expected order: by object name.
		stored := &flexv1.AssetList{}
		Expect(k8sClient.List(ctx, stored, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(stored.Items).To(HaveLen(5))
		slices.SortFunc(stored.Items, func(a, b flexv1.Asset) int { return strings.Compare(a.Name, b.Name) })
		want := make([]string, 0, len(stored.Items))
		for _, a := range stored.Items {
			want = append(want, a.Labels[flexv1.IDLabel])
		}

		By("answering every asset on one page by default, each as GET by id answers it")
		page := mustCall("GET", "/entities/asset", tok, nil)
		Expect(page).To(gstruct.MatchAllKeys(gstruct.Keys{
			"assets": HaveLen(5), "total_num_assets": BeEquivalentTo(5), "total_num_pages": BeEquivalentTo(1),
			"page_number": BeEquivalentTo(1),
		}))
		Expect(ids(page)).To(Equal(want))
		for _, a := range page["assets"].([]any) {
			Expect(a).To(Equal(mustCall("GET", "/entities/asset/"+a.(map[string]any)["id"].(string), tok, nil)))
		}

		By("paging")
		for _, tc := range []struct {
			query        string
			from, to     int
			pages, pageN int
		}{
			{"limit=2", 0, 2, 3, 1},
			{"limit=2&offset=2", 2, 4, 3, 2},
			{"limit=2&offset=4", 4, 5, 3, 3},
			{"limit=2&offset=3", 3, 5, 3, 2},
			{"limit=5000&offset=0", 0, 5, 1, 1},
			{"limit=1&offset=4", 4, 5, 5, 5},
		} {
			page = list(tc.query)
			Expect(ids(page)).To(Equal(want[tc.from:tc.to]), tc.query)
			Expect(page["total_num_assets"]).To(BeEquivalentTo(5), tc.query)
			Expect(page["total_num_pages"]).To(BeEquivalentTo(tc.pages), tc.query)
			Expect(page["page_number"]).To(BeEquivalentTo(tc.pageN), tc.query)
		}

		By("answering an offset past the end with an empty page, as GET /entities/site does")
		page = list("limit=2&offset=5")
		Expect(page["assets"]).To(And(Not(BeNil()), BeEmpty()))
		Expect(page["total_num_assets"]).To(BeEquivalentTo(5))
		Expect(page["total_num_pages"]).To(BeEquivalentTo(3))
		Expect(page["page_number"]).To(BeEquivalentTo(3))
		sites := mustCall("GET", "/entities/site?limit=1&offset=100", tok, nil)
		page = list("limit=1&offset=100")
		Expect(page["page_number"]).To(Equal(sites["page_number"]))
		Expect(page["total_num_pages"]).To(BeEquivalentTo(5))
		Expect(list("offset=9223372036854775807&limit=1")["page_number"]).To(BeNumerically(">", 0))

		By("leaving a deleted asset out at once")
		status, _ := call("DELETE", "/entities/asset/"+want[1], tok, nil)
		Expect(status).To(Equal(http.StatusNoContent))
		page = list("limit=2")
		Expect(ids(page)).To(Equal([]string{want[0], want[2]}))
		Expect(page["total_num_assets"]).To(BeEquivalentTo(4))
		Expect(page["total_num_pages"]).To(BeEquivalentTo(2))
	})

	It("answers an organisation without assets with an empty page", func() {
		Expect(mustCall("GET", "/entities/asset", tok, nil)).To(Equal(map[string]any{
			"assets": []any{}, "total_num_assets": 0.0, "total_num_pages": 0.0, "page_number": 1.0}))
	})

	DescribeTable("answers bad paging parameters with the 422 GET /entities/site answers",
		func(query, key, typ string) {
			status, resp := call("GET", "/entities/asset?"+query, tok, nil)
			entityExpectInvalid(status, resp, typ, "query", key)
			siteStatus, siteResp := call("GET", "/entities/site?"+query, tok, nil)
			Expect(status).To(Equal(siteStatus))
			Expect(resp.Map()).To(Equal(siteResp.Map()))
		},
		Entry("limit=0", "limit=0", "limit", "greater_than_equal"),
		Entry("limit=5001", "limit=5001", "limit", "less_than_equal"),
		Entry("offset=-1", "offset=-1", "offset", "greater_than_equal"),
		Entry("limit=x", "limit=x", "limit", "int_parsing"),
		Entry("offset=1.5", "offset=1.5", "offset", "int_parsing"),
		Entry("limit=-3&offset=x", url.Values{"limit": {"-3"}, "offset": {"x"}}.Encode(), "offset", "int_parsing"),
	)
})
