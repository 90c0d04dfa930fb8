package server_test

import (
	"net/http"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	householdcore "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/index"
	"github.com/flexsite/flexsite/internal/meters"
)

// Specs of PATCH /entities/site/{site_id} (docs/api.md, "The site and asset lifecycle"):
// only what is sent changes, a PATCH that changes nothing writes nothing, and a new MPAN keeps
// the site's id while no two sites ever hold one MPAN (household/claim.go).

func patchMPAN(i int) string { return validMPAN(7000 + i) }

// storedSite reads a site by object name from the API server.
func storedSite(g Gomega, ctx SpecContext, ns, name string) *flexv1.Site {
	GinkgoHelper()
	site := &flexv1.Site{}
	g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, site)).To(Succeed())
	return site
}

// holdersOf names the live sites of ns whose spec holds mpan, read from the API server.
func holdersOf(ctx SpecContext, ns, mpan string) []string {
	GinkgoHelper()
	sites, err := index.NewAPIServerLookup(k8sClient).SitesByMPAN(ctx, ns, mpan)
	Expect(err).NotTo(HaveOccurred())
	var names []string
	for _, s := range sites {
		if s.DeletionTimestamp.IsZero() {
			names = append(names, s.Name)
		}
	}
	return names
}

var _ = Describe("PATCH /entities/site/{site_id}", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("changes only what is sent and answers the site record", func(ctx SpecContext) {
		mpan := patchMPAN(1)
		siteID := onboardedSite(tok, mpan)
		before := storedSite(Default, ctx, o.Namespace, identity.SiteNameForMPAN(mpan))

		rec := mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{"email": "new@example.com"})
		Expect(rec).To(HaveKeyWithValue("id", siteID))
		Expect(rec).To(HaveKeyWithValue("mpan", mpan))
		Expect(rec).To(HaveKeyWithValue("postcode", "SW1A 1AA"))
		Expect(rec).To(HaveKeyWithValue("address", "10 Downing Street"))
		Expect(rec["asset_ids"]).To(HaveLen(2))

		after := storedSite(Default, ctx, o.Namespace, before.Name)
		Expect(after.Spec.Email).To(Equal("new@example.com"))
		want := before.Spec.DeepCopy()
		want.Email = "new@example.com"
		Expect(after.Spec).To(Equal(*want), "nothing but the email changed")

		rec = mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{
			"address": "11 Downing Street", "postcode": "ec1a1bb", "email": nil,
			"tariff": map[string]any{"tariff_type": "dual_rate", "tariff_cheap_start_time": "00:30", "tariff_cheap_end_time": "04:30"},
		})
		Expect(rec).To(HaveKeyWithValue("address", "11 Downing Street"))
		Expect(rec).To(HaveKeyWithValue("postcode", "EC1A 1BB"))
		Expect(rec["tariff"]).To(HaveKeyWithValue("tariff_cheap_start_time", "00:30:00"), "a time answered as production does, HH:MM:SS")
		after = storedSite(Default, ctx, o.Namespace, before.Name)
		Expect(after.Spec.Email).To(Equal("new@example.com"), "null keeps the stored value")
		Expect(after.Spec.Tariff).To(Equal(&flexv1.Tariff{Type: "dual_rate", CheapStartTime: "00:30", CheapEndTime: "04:30"}))
		Expect(after.Spec.BoundaryMeterConsentAt).To(Equal(before.Spec.BoundaryMeterConsentAt))
	})

	It("keeps the stored in-flight marker that the cache's copy of an evaluated site leaves out", func(ctx SpecContext) {
		mpan := patchMPAN(16)
		siteID := onboardedSite(tok, mpan)
		name := identity.SiteNameForMPAN(mpan)
		marker := storedSite(Default, ctx, o.Namespace, name).Annotations[flexv1.InFlightAnnotation]
		Expect(marker).NotTo(BeEmpty(), "an onboard marks its site in flight")
		Eventually(func(g Gomega) {
			cached := &flexv1.Site{}
			g.Expect(serverCache.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, cached)).To(Succeed())
			g.Expect(householdcore.MarkerSpent(cached)).To(BeTrue())
			g.Expect(cached.Annotations).NotTo(HaveKey(flexv1.InFlightAnnotation), "the cache keeps no spent marker")
		}).Should(Succeed())

		mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{"email": "marker@example.com"})
		after := storedSite(Default, ctx, o.Namespace, name)
		Expect(after.Spec.Email).To(Equal("marker@example.com"))
		Expect(after.Annotations).To(HaveKeyWithValue(flexv1.InFlightAnnotation, marker),
			"a REST update writes what it changed, not the cached copy whole")
	})

	It("writes nothing when nothing changes", func(ctx SpecContext) {
		mpan := patchMPAN(2)
		siteID := onboardedSite(tok, mpan)
		name := identity.SiteNameForMPAN(mpan)
		Eventually(func(g Gomega) int64 { return storedSite(g, ctx, o.Namespace, name).Status.ObservedGeneration }).Should(BeNumerically(">", 0))
		version := storedSite(Default, ctx, o.Namespace, name).ResourceVersion
		for _, body := range []map[string]any{
			{},
			{"email": "resident@example.com", "postcode": "SW1A 1AA", "mpan": mpan},
			{"address": "", "email": "", "mpan": ""},
		} {
			mustCall("PATCH", "/entities/site/"+siteID, tok, body)
		}
		Expect(storedSite(Default, ctx, o.Namespace, name).ResourceVersion).To(Equal(version))
	})

	DescribeTable("answers 422 for malformed input, and stores nothing",
		func(ctx SpecContext, body any, loc []any) {
			mpan := patchMPAN(3)
			siteID := onboardedSite(tok, mpan)
			before := snapshot(Default, ctx, o.Namespace)
			status, resp := call("PATCH", "/entities/site/"+siteID, tok, body)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			Expect(resp.Detail()).To(ContainElement(HaveKeyWithValue("loc", loc)), "%s", resp)
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
		},
		Entry("a bad MPAN check digit", map[string]any{"mpan": "1200000000012"}, []any{"body", "mpan"}),
		Entry("an MPAN of letters", map[string]any{"mpan": "MPAN"}, []any{"body", "mpan"}),
		Entry("a bad postcode", map[string]any{"postcode": "NOPE"}, []any{"body", "postcode"}),
		Entry("a bad email", map[string]any{"email": "not-an-email"}, []any{"body", "email"}),
		Entry("an address that is not a string", map[string]any{"address": 12}, []any{"body", "address"}),
		Entry("a tariff without its type", map[string]any{"tariff": map[string]any{}}, []any{"body", "tariff", "tariff_type"}),
		Entry("an unknown tariff type", map[string]any{"tariff": map[string]any{"tariff_type": "cheap"}},
			[]any{"body", "tariff", "tariff_type"}),
		Entry("a cheap period with one end", map[string]any{"tariff": map[string]any{"tariff_type": "dual_rate",
			"tariff_cheap_start_time": "00:30"}}, []any{"body", "tariff"}),
		Entry("a cheap period at 25 o'clock", map[string]any{"tariff": map[string]any{"tariff_type": "dual_rate",
			"tariff_cheap_start_time": "25:00", "tariff_cheap_end_time": "04:30"}}, []any{"body", "tariff", "tariff_cheap_start_time"}),
		Entry("a body that is not an object", []any{1}, []any{"body"}),
	)

	It("answers 404 for an unknown site or another organisation's, and 422 for a malformed id", func(ctx SpecContext) {
		other := newOrg(ctx)
		otherID := onboardedSite(other.token(), patchMPAN(4))
		before := snapshot(Default, ctx, other.Namespace)
		status, resp := call("PATCH", "/entities/site/"+otherID, tok, map[string]any{"email": "mine@example.com"})
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("PATCH", "/entities/site/00000000-0000-4000-8000-000000000000", tok, map[string]any{})
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("PATCH", "/entities/site/not-a-uuid", tok, map[string]any{})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(snapshot(Default, ctx, other.Namespace)).To(Equal(before))
	})

	It("moves a site to a new MPAN: same id and object, the new MPAN claimed, the old one free", func(ctx SpecContext) {
		oldMPAN, newMPAN := patchMPAN(5), patchMPAN(6)
		siteID := onboardedSite(tok, oldMPAN)
		name := identity.SiteNameForMPAN(oldMPAN)

		rec := mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{"mpan": newMPAN})
		Expect(rec).To(HaveKeyWithValue("id", siteID))
		Expect(rec).To(HaveKeyWithValue("mpan", newMPAN))
		Expect(storedSite(Default, ctx, o.Namespace, name).Spec.MPAN).To(Equal(newMPAN), "the site keeps its object name")
		claim := &flexv1.MPANClaim{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.MPANClaimName(newMPAN)}, claim)).To(Succeed())
		Expect(claim.Spec).To(Equal(flexv1.MPANClaimSpec{MPAN: newMPAN, SiteName: name}))

		// Its household stays whole: assets, enrolment, eligibility.
		Expect(mustCall("GET", "/entities/site/"+siteID, tok, nil)["asset_ids"]).To(HaveLen(2))
		Eventually(func(g Gomega) {
			elig := mustCallG(g, "GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
			g.Expect(elig["eligible_propositions"]).To(ContainElement("limited_pause"))
		}).Should(Succeed())

		// The organisation finds it by its new MPAN, and an onboard of that MPAN fills it in.
		page := mustCall("GET", "/entities/site?mpan="+newMPAN, tok, nil)
		Expect(page["sites"]).To(ConsistOf(HaveKeyWithValue("id", siteID)))
		again := mustCall("POST", "/entities/site/onboard", tok, household(newMPAN, func(b map[string]any) {
			b["assets"] = []any{map[string]any{"external_id": "charger-" + oldMPAN, "type": "charger"}}
		}))
		Expect(again["site"]).To(HaveKeyWithValue("site_id", siteID))
		Expect(again["enrolment"]).To(HaveKeyWithValue("status", "already_enrolled"))

		// The old MPAN is free: onboarding it makes a second household, under another name
		// (the first still has its name), holding the MPAN by a claim.
		fresh := mustCall("POST", "/entities/site/onboard", tok, household(oldMPAN, func(b map[string]any) {
			b["assets"] = []any{map[string]any{"external_id": "second-charger", "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}}
		}))
		Expect(fresh["site"]).NotTo(HaveKeyWithValue("site_id", siteID))
		Expect(holdersOf(ctx, o.Namespace, oldMPAN)).To(HaveLen(1))
		Expect(holdersOf(ctx, o.Namespace, newMPAN)).To(Equal([]string{name}))
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.MPANClaimName(oldMPAN)}, claim)).To(Succeed())
		Expect(claim.Spec.SiteName).NotTo(Equal(name))
	})

	It("moves back to the MPAN its name holds, releasing the claim it leaves", func(ctx SpecContext) {
		a, b := patchMPAN(7), patchMPAN(8)
		siteID := onboardedSite(tok, a)
		mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{"mpan": b})
		mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{"mpan": a})
		Expect(storedSite(Default, ctx, o.Namespace, identity.SiteNameForMPAN(a)).Spec.MPAN).To(Equal(a))
		Eventually(func() error {
			return k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.MPANClaimName(b)}, &flexv1.MPANClaim{})
		}).Should(MatchError(ContainSubstring("not found")))
		// b is free again: anyone may onboard it.
		Expect(onboardedSite(tok, b)).NotTo(Equal(siteID))
	})

	It("answers 409 with Retry-After while another site is moving to the MPAN", func(ctx SpecContext) {
		a, b, c := patchMPAN(11), patchMPAN(12), patchMPAN(13)
		onboardedSite(tok, a)
		siteID := onboardedSite(tok, c)
		// A change to b that died after claiming it: pending for household.ClaimGrace.
		Expect(k8sClient.Create(ctx, householdcore.NewClaim(storedSite(Default, ctx, o.Namespace, identity.SiteNameForMPAN(a)), b))).To(Succeed())
		status, header, resp := callWithHeader("POST", "/entities/site/onboard", tok, household(b))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(header.Get("Retry-After")).To(Equal("1"))
		Expect(holdersOf(ctx, o.Namespace, b)).To(BeEmpty())
		status, header, resp = callWithHeader("PATCH", "/entities/site/"+siteID, tok, map[string]any{"mpan": b})
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(header.Get("Retry-After")).To(Equal("1"))
		Expect(resp.Detail()).To(ContainSubstring("being moved"))
	})

	It("lets exactly one of an MPAN change and an onboard of that MPAN hold it, without a 5xx", func(ctx SpecContext) {
		for round := range 6 {
			from, contested := patchMPAN(100+2*round), patchMPAN(101+2*round)
			siteID := onboardedSite(tok, from)
			var wg sync.WaitGroup
			var patchStatus, onboardStatus int
			var patchResp, onboardResp response
			wg.Add(2)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				patchStatus, patchResp = call("PATCH", "/entities/site/"+siteID, tok, map[string]any{"mpan": contested})
			}()
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				onboardStatus, onboardResp = call("POST", "/entities/site/onboard", tok, household(contested))
			}()
			wg.Wait()
			Expect(patchStatus).To(BeElementOf(http.StatusOK, http.StatusConflict), "round %d: %s", round, patchResp)
			Expect(onboardStatus).To(BeElementOf(http.StatusOK, http.StatusConflict), "round %d: %s", round, onboardResp)
			Expect(holdersOf(ctx, o.Namespace, contested)).To(HaveLen(1), "round %d", round)
			if patchStatus == http.StatusOK && onboardStatus == http.StatusOK {
				// The onboard came second and filled in the moved site.
				Expect(onboardResp.Map()["site"]).To(HaveKeyWithValue("site_id", siteID), "round %d", round)
			}
		}
	})

	It("lets an end user's token change its own site only", func(ctx SpecContext) {
		user := mustCall("POST", "/auth/component-token", tok, componentForm("patch-user", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userTok := user["access_token"].(string)
		own := userSite(ctx, o.Namespace, "patch-user")
		otherID := onboardedSite(tok, patchMPAN(14))

		mpan := patchMPAN(15)
		rec := mustCall("PATCH", "/entities/site/"+own.Labels[flexv1.IDLabel], userTok,
			map[string]any{"address": "1 Home Street", "postcode": "SW1A 1AA", "mpan": mpan})
		Expect(rec).To(HaveKeyWithValue("mpan", meters.MaskedMPAN(mpan)), "a household is shown its MPAN masked")
		Expect(holdersOf(ctx, o.Namespace, mpan)).To(Equal([]string{own.Name}))

		status, resp := call("PATCH", "/entities/site/"+otherID, userTok, map[string]any{"address": "elsewhere"})
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})
})
