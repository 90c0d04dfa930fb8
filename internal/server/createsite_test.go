package server_test

import (
	"context"
	"fmt"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// POST /entities/site (docs/api.md, "Create site"): a site alone, under onboarding's rules,
// refused when the organisation already has a site with its MPAN or at its address.

// createSiteMPAN is the MPAN of the i-th site of these specs.
func createSiteMPAN(i int) string { return validMPAN(770000 + i) }

// createSiteBody is a SiteRequest.
func createSiteBody(mpan, street, postcode string) map[string]any {
	return map[string]any{"mpan": mpan, "postcode": postcode, "street_address": street,
		"email": "resident@example.com", "gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"}
}

// caseCreateSite is POST /entities/site under fault injection (faults_test.go): one new site,
// at an address of its own.
var caseCreateSite = faultCase{name: "create site", prepare: func(_ context.Context, e faultEnv, i int) faultRequest {
	mpan := faultMPAN(i)
	return faultRequest{path: "/entities/site", body: createSiteBody(mpan, fmt.Sprintf("%d Fault Road", i), "SW1A 1AA"),
		check: func(ctx context.Context, g Gomega, answer map[string]any, _ bool) {
			g.Expect(answer).To(HaveKeyWithValue("mpan", mpan))
			faultExpectHousehold(ctx, g, e.ns, mpan, answer["id"], nil)
		}}
}}

// caseCreateSiteMoved creates a site for an MPAN whose own name a site that moved to another
// meter point keeps: two writes, the MPAN's claim and then the site, both undone on failure.
var caseCreateSiteMoved = faultCase{name: "create site (an MPAN its site moved from)",
	prepare: func(ctx context.Context, e faultEnv, i int) faultRequest {
		mpan, moved := faultMPAN(i), faultMPAN(700+i)
		first := mustCall("POST", "/entities/site", e.tok, createSiteBody(mpan, fmt.Sprintf("%d Moved Road", i), "SW1A 1AA"))
		mustCall("PATCH", "/entities/site/"+first["id"].(string), e.tok, map[string]any{"mpan": moved})
		Eventually(func(g Gomega) {
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
			g.Expect(site.Status.ObservedGeneration).To(Equal(site.Generation), "the controllers have settled the move")
		}).Should(Succeed())
		return faultRequest{path: "/entities/site", body: createSiteBody(mpan, fmt.Sprintf("%d New Road", i), "SW1A 1AA"),
			check: func(ctx context.Context, g Gomega, answer map[string]any, _ bool) {
				claim := &flexv1.MPANClaim{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: identity.MPANClaimName(mpan)}, claim)).To(Succeed())
				site := &flexv1.Site{}
				g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: e.ns, Name: claim.Spec.SiteName}, site)).To(Succeed())
				g.Expect(site.Labels).To(HaveKeyWithValue(flexv1.IDLabel, answer["id"]))
				g.Expect(site.Spec.MPAN).To(Equal(mpan))
			}}
	}}

var _ = Describe("POST /entities/site", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	// expectRefused sends body, expects status, and that nothing stored changed.
	expectRefused := func(ctx SpecContext, body map[string]any, status int) response {
		GinkgoHelper()
		before := snapshot(Default, ctx, o.Namespace)
		got, resp := call("POST", "/entities/site", tok, body)
		Expect(got).To(Equal(status), "%s", resp)
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before), "a refused request stores nothing")
		return resp
	}

	It("creates a site alone: prod's SiteResponse, which GET answers too, and the Site object", func(ctx SpecContext) {
		mpan := createSiteMPAN(1)
		body := createSiteBody(mpan, "12, High St.", "sw1a2aa")
		answer := mustCall("POST", "/entities/site", tok, body)
		id, _ := answer["id"].(string)
		Expect(id).To(MatchRegexp(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`))
		Expect(answer).To(Equal(map[string]any{"id": id, "mpan": mpan, "postcode": "SW1A 2AA", "address": "12, High St.",
			"asset_ids": []any{}, "markets": []any{}, "dispatch_methods": []any{},
			"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"}))
		Expect(mustCall("GET", "/entities/site/"+id, tok, nil)).To(Equal(answer))

		By("storing the Site, alone, under its MPAN's name, which the Site controller publishes")
		siteName := identity.SiteNameForMPAN(mpan)
		site := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: siteName}, site)).To(Succeed())
		Expect(site.Labels).To(HaveKeyWithValue(flexv1.IDLabel, id))
		Expect(site.Spec.MPAN).To(Equal(mpan))
		Expect(site.Spec.Postcode).To(Equal("SW1A 2AA"))
		Expect(site.Spec.StreetAddress).To(Equal("12, High St."))
		Expect(site.Spec.Email).To(Equal("resident@example.com"))
		Expect(site.Spec.BoundaryMeterConsentAt).NotTo(BeNil())
		Expect(site.Spec.BoundaryMeterConsentAt.UTC().Format("2006-01-02T15:04:05Z")).To(Equal("2026-01-15T10:30:00Z"))
		Expect(relOfSite(ctx, Default, o.Namespace, siteName).names()).To(Equal([]string{"Site/" + siteName}))
		Eventually(func(g Gomega) {
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(site), site)).To(Succeed())
			g.Expect(relProvisioned(site)).To(BeTrue())
		}).Should(Succeed())
		Expect(mustCall("GET", "/entities/site?mpan="+mpan, tok, nil)["sites"]).To(Equal([]any{answer}))
	})

	It("answers an MPAN the organisation's sites already hold with the legacy onboard's conflict", func(ctx SpecContext) {
		created := createSiteMPAN(2)
		mustCall("POST", "/entities/site", tok, createSiteBody(created, "1 First Road", "M1 1AE"))
		onboarded := createSiteMPAN(3)
		mustCall("POST", "/entities/site/onboard", tok, household(onboarded))
		for _, mpan := range []string{created, onboarded} {
			resp := expectRefused(ctx, createSiteBody(mpan, "99 Elsewhere Lane", "M1 1AE"), http.StatusConflict)
			Expect(resp.Detail()).To(Equal(fmt.Sprintf("Site with MPAN %s already exists", mpan)))
		}
		legacy := map[string]any{"site": map[string]any{"mpan": created, "postcode": "M1 1AE"},
			"asset":            map[string]any{"external_id": "legacy-" + created, "type": "charger", "properties": map[string]any{"power_kw": 7}},
			"dispatch_consent": map[string]any{"dispatch_methods": []any{}}}
		status, resp := call("POST", "/entities/site/onboard-site-and-asset", tok, legacy)
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(resp.Detail()).To(Equal(fmt.Sprintf("Site with MPAN %s already exists", created)), "one rule, one answer")
	})

	It("creates a site for an MPAN whose site moved to another meter point, holding it by onboarding's claim", func(ctx SpecContext) {
		moved, now := createSiteMPAN(5), createSiteMPAN(6)
		first := mustCall("POST", "/entities/site", tok, createSiteBody(moved, "3 Moving Way", "M1 1AE"))
		Expect(mustCall("PATCH", "/entities/site/"+first["id"].(string), tok, map[string]any{"mpan": now})).To(HaveKeyWithValue("mpan", now))

		By("refusing the MPAN the first site holds now, by its claim")
		resp := expectRefused(ctx, createSiteBody(now, "4 Moving Way", "M1 1AE"), http.StatusConflict)
		Expect(resp.Detail()).To(Equal(fmt.Sprintf("Site with MPAN %s already exists", now)))

		By("creating a site for the MPAN the first one left: under another name, holding it by a claim")
		answer := mustCall("POST", "/entities/site", tok, createSiteBody(moved, "4 Moving Way", "M1 1AE"))
		Expect(answer["id"]).NotTo(Equal(first["id"]))
		Expect(answer).To(HaveKeyWithValue("mpan", moved))
		claim := &flexv1.MPANClaim{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.MPANClaimName(moved)}, claim)).To(Succeed())
		site := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: claim.Spec.SiteName}, site)).To(Succeed())
		Expect(site.Labels).To(HaveKeyWithValue(flexv1.IDLabel, answer["id"]))
		Expect(site.Name).NotTo(Equal(identity.SiteNameForMPAN(moved)), "the MPAN's own name is the first site's")
	})

	It("refuses a second site at the same address, however it is spelt, naming the first", func(ctx SpecContext) {
		first := mustCall("POST", "/entities/site", tok, createSiteBody(createSiteMPAN(4), "12 High Street", "SW1A 1AA"))
		for i, spelling := range []struct{ street, postcode string }{
			{"12 High Street", "SW1A 1AA"},
			{"12, HIGH street.", "SW1A 1AA"},
			{"  12   High    Street ", "SW1A 1AA"},
			{"12 High Street", "sw1a1aa"},
		} {
			resp := expectRefused(ctx, createSiteBody(createSiteMPAN(10+i), spelling.street, spelling.postcode), http.StatusConflict)
			Expect(resp.Detail()).To(Equal(map[string]any{"existing_site_id": first["id"],
				"message": fmt.Sprintf("A site with the same address already exists: %s", first["id"])}), "%q %q", spelling.street, spelling.postcode)
		}

		By("creating a site at another address: an abbreviation is another word, as documented")
		mustCall("POST", "/entities/site", tok, createSiteBody(createSiteMPAN(20), "12 High St", "SW1A 1AA"))
		mustCall("POST", "/entities/site", tok, createSiteBody(createSiteMPAN(21), "12 High Street", "SW1A 2AA"))

		By("creating another organisation's site at the same address: its sites are not compared (nor revealed)")
		other := newOrg(ctx)
		answer := mustCall("POST", "/entities/site", other.token(), createSiteBody(createSiteMPAN(22), "12 High Street", "SW1A 1AA"))
		Expect(answer["id"]).NotTo(Equal(first["id"]))

		By("comparing with live sites only: once the first is deleted, its address is free")
		status, resp := call("DELETE", "/entities/site/"+first["id"].(string), tok, nil)
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		Eventually(func() int {
			status, _ := call("POST", "/entities/site", tok, createSiteBody(createSiteMPAN(23), "12, high street", "SW1A 1AA"))
			return status
		}).Should(Equal(http.StatusOK))
	})

	DescribeTable("refuses bad input with the documented error, storing nothing",
		func(ctx SpecContext, mutate func(map[string]any), status int, loc []any) {
			body := createSiteBody(createSiteMPAN(30), "5 Input Street", "SW1A 1AA")
			mutate(body)
			resp := expectRefused(ctx, body, status)
			if loc == nil {
				Expect(resp.Detail()).To(HavePrefix("Invalid email address"))
				return
			}
			items, ok := resp.Detail().([]any)
			Expect(ok).To(BeTrue(), "the array form: %s", resp)
			Expect(items).To(ContainElement(HaveKeyWithValue("loc", loc)), "%s", resp)
			Expect(sitesIn(ctx, o.Namespace)).To(BeEmpty())
		},
		Entry("an MPAN with a bad check digit", func(b map[string]any) {
			mpan := createSiteMPAN(30)
			b["mpan"] = mpan[:12] + string('0'+(mpan[12]-'0'+1)%10)
		}, http.StatusUnprocessableEntity, []any{"body", "mpan"}),
		Entry("no MPAN", func(b map[string]any) { delete(b, "mpan") }, http.StatusUnprocessableEntity, []any{"body", "mpan"}),
		Entry("no postcode", func(b map[string]any) { delete(b, "postcode") }, http.StatusUnprocessableEntity, []any{"body", "postcode"}),
		Entry("a postcode that is not UK-shaped", func(b map[string]any) { b["postcode"] = "12345" },
			http.StatusUnprocessableEntity, []any{"body", "postcode"}),
		Entry("an invalid email: 400, as onboard", func(b map[string]any) { b["email"] = "not-an-email" }, http.StatusBadRequest, nil),
		Entry("a consent time in the future", func(b map[string]any) { b["gave_boundary_meter_consent_at"] = "2099-01-01T00:00:00Z" },
			http.StatusUnprocessableEntity, []any{"body", "gave_boundary_meter_consent_at"}),
		Entry("a consent time without a zone", func(b map[string]any) { b["gave_boundary_meter_consent_at"] = "2026-01-15T10:30:00" },
			http.StatusUnprocessableEntity, []any{"body", "gave_boundary_meter_consent_at"}),
		Entry("a control character in the street address", func(b map[string]any) { b["street_address"] = "5 Input\u0000 Street" },
			http.StatusUnprocessableEntity, []any{"body", "street_address"}),
		Entry("a street address that is not a string", func(b map[string]any) { b["street_address"] = 5 },
			http.StatusUnprocessableEntity, []any{"body", "street_address"}),
	)
})
