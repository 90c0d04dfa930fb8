package server_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gstruct"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	householdcore "github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/server"
	"github.com/flexsite/flexsite/internal/testenv"
)

// Specs of the site rows of docs/api.md, "The site and asset lifecycle": DELETE
// /entities/site/{site_id}, POST /entities/site/check-eligibility and POST
// /entities/site/{site_id}/dispatch-consent and …/dispatch-deconsent. Each spec runs in an
// organisation of its own and checks what is stored, not only the answer.

// lcBareSite stores a site that holds nothing, as kubectl would (with the id and finalizer
// the REST API gives its sites), and waits until the REST API serves it. It answers the site's
// object name and API id.
func lcBareSite(ctx context.Context, tok, ns, mpan string) (name, id string) {
	GinkgoHelper()
	site := householdcore.NewSite(ns, identity.SiteNameForMPAN(mpan))
	site.Spec = flexv1.SiteSpec{MPAN: mpan, Postcode: "SW1A 1AA"}
	Expect(k8sClient.Create(ctx, site)).To(Succeed())
	id = site.Labels[flexv1.IDLabel]
	Eventually(func() int { status, _ := call("GET", "/entities/site/"+id, tok, nil); return status }).Should(Equal(http.StatusOK))
	return site.Name, id
}

// lcGone waits until nothing of a site is stored any more: the site (its finalizer done) and
// every child.
func lcGone(ctx context.Context, ns, siteName string) {
	GinkgoHelper()
	Eventually(func(g Gomega) []string { return relOfSite(ctx, g, ns, siteName).names() }).Should(BeEmpty())
}

// lcSend sends one request without Gomega (goroutines may use it).
func lcSend(base, method, path, token string, body any) relAnswer {
	if method == http.MethodPost {
		return relPost(relHTTP, base, path, token, body)
	}
	a := relAnswer{label: method, start: time.Now()}
	req, err := http.NewRequest(method, base+path, nil)
	if err != nil {
		a.err = err
		return a
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := relHTTP.Do(req)
	if err != nil {
		a.err = err
		return a
	}
	a.body, a.err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	a.status, a.end = resp.StatusCode, time.Now()
	return a
}

// siteDeleteHooks is the manager's client with hooks run just before and just after it deletes
// a Site (once each): what another client does in the instant between the REST API's look at
// the site and its delete, or straight after the delete.
type siteDeleteHooks struct {
	client.Client
	mu            sync.Mutex
	before, after func(ctx context.Context, site *flexv1.Site)
	deletes       int // Site deletes sent
}

func (c *siteDeleteHooks) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	site, isSite := obj.(*flexv1.Site)
	if !isSite {
		return c.Client.Delete(ctx, obj, opts...)
	}
	c.mu.Lock()
	c.deletes++
	before, after := c.before, c.after
	c.before, c.after = nil, nil
	c.mu.Unlock()
	if before != nil {
		before(ctx, site)
	}
	err := c.Client.Delete(ctx, obj, opts...)
	if err == nil && after != nil {
		after(ctx, site)
	}
	return err
}

func (c *siteDeleteHooks) siteDeletes() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deletes
}

// hookedFacade serves a server instance that writes through c.
func hookedFacade(c client.Client) (string, func()) {
	cfg := apiSrv.Config
	cfg.Client = c
	srv := httptest.NewServer(server.NewServer(cfg))
	return srv.URL, srv.Close
}

var _ = Describe("DELETE /entities/site/{site_id}", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})
	path := func(id string) string { return "/entities/site/" + id }

	It("deletes a site that holds nothing: 204, and a read straight after answers 404", func(ctx SpecContext) {
		const mpan = "1200000000011"
		name, id := lcBareSite(ctx, tok, o.Namespace, mpan)
		other, _ := lcBareSite(ctx, tok, o.Namespace, "2301234567894")

		status, resp := call("DELETE", path(id), tok, nil)
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		Expect(resp).To(BeEmpty())

		By("answering only once this replica no longer serves the site")
		status, resp = call("GET", path(id), tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(Equal(notFoundSite))
		page := mustCall("GET", "/entities/site?mpan="+mpan, tok, nil)
		Expect(page["sites"]).To(BeEmpty())

		By("removing the object (its finalizer done) and leaving the other site alone")
		lcGone(ctx, o.Namespace, name)
		Expect(sitesIn(ctx, o.Namespace)).To(ConsistOf(HaveField("Name", other)))

		By("answering a repeated delete with 404")
		status, resp = call("DELETE", path(id), tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(Equal(notFoundSite))

		By("letting the same MPAN be onboarded again afterwards")
		Expect(onboardedSite(tok, mpan)).NotTo(Equal(id))
	})

	It("deletes an end user's household that has nothing yet; the end user's token then finds nothing", func(ctx SpecContext) {
		const externalUserID = "delete-me"
		tokUser := mustCall("POST", "/auth/component-token", tok,
			componentForm(externalUserID, "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))["access_token"].(string)
		site := userSite(ctx, o.Namespace, externalUserID)
		id := site.Labels[flexv1.IDLabel]
		mustCall("GET", path(id), tokUser, nil)

		status, resp := call("DELETE", path(id), tok, nil)
		Expect(status).To(Equal(http.StatusNoContent), "%s", resp)
		status, resp = call("GET", path(id), tokUser, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		lcGone(ctx, o.Namespace, site.Name)
	})

	It("refuses a site with assets or enrolments with 400 pointing at offboard, and changes nothing", func(ctx SpecContext) {
		By("a site with two assets and an enrolment")
		const mpan = "1200000000011"
		onboarded := onboardedSite(tok, mpan)
		faultSettled(ctx, o.Namespace, mpan, flexv1.PropositionLimitedPause)
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := call("DELETE", path(onboarded), tok, nil)
		Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
		Expect(resp.Detail()).To(And(ContainSubstring("2 assets and 1 enrolment"),
			ContainSubstring("offboard-site-and-assets"), ContainSubstring(onboarded)))

		By("a site whose assets are gone but that is still enrolled (declared with kubectl)")
		siteName, bare := lcBareSite(ctx, tok, o.Namespace, "2301234567894")
		enrolment := householdcore.NewEnrolment(&flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: siteName}},
			flexv1.PropositionPriceCurve, false)
		Expect(k8sClient.Create(ctx, enrolment)).To(Succeed())
		status, resp = call("DELETE", path(bare), tok, nil)
		Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
		Expect(resp.Detail()).To(And(HavePrefix("Site cannot be deleted: it has 1 enrolment."), ContainSubstring("offboard")))

		By("changing nothing stored")
		Expect(entityLinesWithout(snapshot(Default, ctx, o.Namespace), siteName)).To(Equal(before))
		Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(enrolment), &flexv1.Enrolment{})).To(Succeed())
		site := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: siteName}, site)).To(Succeed())
		Expect(site.DeletionTimestamp.IsZero()).To(BeTrue())
		mustCall("GET", path(onboarded), tok, nil)
		mustCall("GET", path(bare), tok, nil)
	})

	It("refuses a site with reward history", func(ctx SpecContext) {
		withLedger, ledgerSite := lcBareSite(ctx, tok, o.Namespace, "1200000000011")
		Expect(k8sClient.Create(ctx, &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(withLedger)},
			Spec: flexv1.RewardLedgerSpec{SiteName: withLedger, Transactions: []flexv1.RewardTransaction{
				{ID: identity.NewID(), Type: "signup bonus", CreditPence: 500}}},
		})).To(Succeed())
		status, resp := call("DELETE", path(ledgerSite), tok, nil)
		Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
		Expect(resp.Detail()).To(ContainSubstring("it has a reward ledger"))
	})

	It("answers 404 for an unknown site or another organisation's, and 422 for a malformed id", func(ctx SpecContext) {
		other := newOrg(ctx)
		otherTok := other.token()
		otherName, otherID := lcBareSite(ctx, otherTok, other.Namespace, "1200000000011")

		status, resp := call("DELETE", path(otherID), tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(Equal(notFoundSite))
		status, resp = call("DELETE", path(uuid.NewString()), tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(Equal(notFoundSite))
		status, resp = call("DELETE", path("not-a-uuid"), tok, nil)
		expectValidationItem(status, resp, []any{"path", "site_id"}, "uuid_parsing")
		status, resp = call("DELETE", path("check-eligibility"), tok, nil)
		expectValidationItem(status, resp, []any{"path", "site_id"}, "uuid_parsing")

		site := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: other.Namespace, Name: otherName}, site)).To(Succeed())
		Expect(site.DeletionTimestamp.IsZero()).To(BeTrue(), "another organisation's site is untouched")
		mustCall("GET", path(otherID), otherTok, nil)
	})

	Describe("an asset created while the site is deleted", func() {
		// lateAsset creates an asset of the site straight on the API server, as kubectl would.
		lateAsset := func(ctx context.Context, site, externalID string) *flexv1.Asset {
			defer GinkgoRecover()
			// A site named, not read: no controller reference, as kubectl writes it.
			late := householdcore.NewAsset(&flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: site}},
				externalID, flexv1.AssetTypeCharger)
			Expect(k8sClient.Create(ctx, late)).To(Succeed())
			return late
		}
		// deleteThrough sends the delete through a server instance with the hooks.
		deleteThrough := func(hooks *siteDeleteHooks, id string) relAnswer {
			GinkgoHelper()
			url, done := hookedFacade(hooks)
			defer done()
			a := lcSend(url, "DELETE", path(id), tok, nil)
			Expect(a.err).NotTo(HaveOccurred())
			return a
		}

		It("is seen, or goes with the site, when it arrives in the instant before the delete", func(ctx SpecContext) {
			name, id := lcBareSite(ctx, tok, o.Namespace, "1200000000011")
			var late *flexv1.Asset
			hooks := &siteDeleteHooks{Client: apiSrv.Client, before: func(ctx context.Context, _ *flexv1.Site) {
				late = lateAsset(ctx, name, "late-charger")
			}}
			a := deleteThrough(hooks, id)
			// The Site controller re-evaluates the site for its new asset. If its status write comes
			// before the delete, the delete's precondition fails and the look is repeated (400);
			// otherwise the delete wins and takes the asset with it (204). Never a deleted site
			// whose asset lives on.
			switch a.status {
			case http.StatusNoContent:
				Expect(hooks.siteDeletes()).To(Equal(1))
				lcGone(ctx, o.Namespace, name)
			case http.StatusBadRequest:
				Expect(hooks.siteDeletes()).To(Equal(1), "a refused delete is not sent again")
				Expect(relOfSite(ctx, Default, o.Namespace, name).names()).To(ConsistOf("Site/"+name, "Asset/"+late.Name))
			default:
				Fail(fmt.Sprintf("answered %s", a))
			}
			GinkgoWriter.Printf("FIGURES delete with an asset arriving just before: %d\n", a.status)
		})

		It("is seen when it changed the site before the delete: the precondition fails, the look is repeated, 400",
			func(ctx SpecContext) {
				name, id := lcBareSite(ctx, tok, o.Namespace, "1200000000011")
				var late *flexv1.Asset
				hooks := &siteDeleteHooks{Client: apiSrv.Client, before: func(ctx context.Context, looked *flexv1.Site) {
					defer GinkgoRecover()
					late = lateAsset(ctx, name, "late-battery")
					// Wait for the Site controller's status write for the new asset.
					Eventually(func(g Gomega) string {
						current := &flexv1.Site{}
						g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(looked), current)).To(Succeed())
						return current.ResourceVersion
					}).ShouldNot(Equal(looked.ResourceVersion))
				}}
				a := deleteThrough(hooks, id)
				Expect(a.status).To(Equal(http.StatusBadRequest), "%s", a)
				Expect(a.json()["detail"]).To(ContainSubstring("it has 1 asset."))
				Expect(hooks.siteDeletes()).To(Equal(1), "the stale delete was refused by its precondition; no other was sent")
				Expect(relOfSite(ctx, Default, o.Namespace, name).names()).To(ConsistOf("Site/"+name, "Asset/"+late.Name))
				site := &flexv1.Site{}
				Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: name}, site)).To(Succeed())
				Expect(site.DeletionTimestamp.IsZero()).To(BeTrue())
			})

		It("goes with the site when it is admitted just after the delete (an admission check on a stale cache): 204",
			func(ctx SpecContext) {
				name, id := lcBareSite(ctx, tok, o.Namespace, "1200000000011")
				var late *flexv1.Asset
				hooks := &siteDeleteHooks{Client: apiSrv.Client, after: func(ctx context.Context, _ *flexv1.Site) {
					late = lateAsset(ctx, name, "later-charger")
				}}
				a := deleteThrough(hooks, id)
				Expect(a.status).To(Equal(http.StatusNoContent), "%s", a)
				// The request deletes the children its cache has seen (it may not LIST); one the
				// cache has not seen yet is the Site finalizer's, and the site goes only once it
				// is gone.
				By("the Site finalizer deleting the late asset before the site goes")
				lcGone(ctx, o.Namespace, name)
				Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(late), &flexv1.Asset{}))).
					To(BeTrue(), "the site went with the late asset still stored")
				Eventually(func() (int, error) {
					status, _, err := testenv.Call(apiServer.URL, "GET", "/entities/asset/"+late.Labels[flexv1.IDLabel], tok, nil)
					return status, err
				}).Should(Equal(http.StatusNotFound))
			})

		It("never leaves an asset behind a deleted site, nor answers 5xx, when creates race the delete (10 rounds)",
			func(ctx SpecContext) {
				const rounds, creators = 10, 4
				tally := map[string]int{}
				for round := range rounds {
					name, id := lcBareSite(ctx, tok, o.Namespace, validMPAN(8000+round))
					answers := relConcurrently(creators+1, func(i int) relAnswer {
						if i == creators {
							a := lcSend(apiServer.URL, "DELETE", path(id), tok, nil)
							a.label = "delete"
							return a
						}
						// Later rounds send the creates later, so that the delete wins some rounds
						// (all at once, the creates win: the delete reads more before it writes).
						time.Sleep(time.Duration(round) * 3 * time.Millisecond)
						a := lcSend(apiServer.URL, "POST", "/entities/asset", tok, map[string]any{
							"external_id": fmt.Sprintf("race-%d-%d", round, i), "type": "battery", "site_id": id})
						a.label = "create"
						return a
					})
					deleted := false
					var created []string
					for _, a := range answers {
						Expect(a.err).NotTo(HaveOccurred())
						tally[fmt.Sprintf("%s %d", a.label, a.status)]++
						switch a.label {
						case "delete":
							Expect(a.status).To(BeElementOf(http.StatusNoContent, http.StatusBadRequest), "%s", a)
							deleted = a.status == http.StatusNoContent
						default:
							Expect(a.status).To(BeElementOf(http.StatusOK, http.StatusNotFound), "%s", a)
							if a.status == http.StatusOK {
								created = append(created, "Asset/"+identity.AssetName(a.json()["external_id"].(string)))
							}
						}
					}
					if deleted {
						// A 204 took everything: also any asset a create answered 200 for in the race.
						lcGone(ctx, o.Namespace, name)
						continue
					}
					Expect(created).NotTo(BeEmpty(), "a 400 names assets that exist")
					Consistently(func(g Gomega) []string { return relOfSite(ctx, g, o.Namespace, name).names() }, time.Second).
						Should(ConsistOf(append(created, "Site/"+name)))
				}
				GinkgoWriter.Printf("FIGURES race delete-vs-create-asset: %d rounds of 1 delete and %d creates: %v\n", rounds, creators, tally)
			})
	})
})

// lcCheck is POST /entities/site/check-eligibility.
const lcCheck = "/entities/site/check-eligibility"

// lcVerdicts reduces a check-eligibility answer to proposition -> issues ("eligible" when it is).
func lcVerdicts(g Gomega, answer map[string]any) map[string]any {
	out := map[string]any{}
	for _, p := range answer["propositions"].([]any) {
		pe := p.(map[string]any)
		if pe["is_eligible"] == true {
			g.Expect(pe["issues"]).To(BeEmpty())
			out[pe["proposition"].(string)] = "eligible"
			continue
		}
		out[pe["proposition"].(string)] = pe["issues"]
	}
	return out
}

func lcAll(v any) map[string]any {
	return map[string]any{"limited_pause": v, "full_asset_schedule_control": v, "price_curve": v}
}

var _ = Describe("POST /entities/site/check-eligibility", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})

	It("evaluates an MPAN with an optional asset model by the rules in force, and stores nothing", func(ctx SpecContext) {
		onboardedSite(tok, "1200000000011") // something stored, so the snapshot means something
		faultSettled(ctx, o.Namespace, "1200000000011", flexv1.PropositionLimitedPause)
		before := snapshot(Default, ctx, o.Namespace)

		for _, tc := range []struct {
			body map[string]any
			want map[string]any
		}{
			{map[string]any{"mpan": "2301234567894", "asset_model": "zappi"}, lcAll("eligible")},
			{map[string]any{"mpan": "2301 2345 67894", "asset_model": "axle_charger_v1"}, lcAll("eligible")},
			{map[string]any{"mpan": "2301234567894"}, lcAll([]any{"asset_model_not_set"})},
			{map[string]any{"mpan": "2301234567894", "asset_model": ""}, lcAll([]any{"asset_model_not_set"})},
			{map[string]any{"mpan": "2301234567894", "asset_model": nil}, lcAll([]any{"asset_model_not_set"})},
			{map[string]any{"mpan": "2301234567894", "asset_model": "generic_heat_pump"}, lcAll([]any{"asset_model_not_cop11_qualified"})},
			{map[string]any{"mpan": "2301234567894", "asset_model": "legacy_charger"}, map[string]any{
				"limited_pause":               []any{"asset_model_enrol_eligibility_override"},
				"full_asset_schedule_control": []any{"asset_model_not_cop11_qualified"},
				"price_curve":                 []any{"asset_model_not_cop11_qualified"}}},
		} {
			answer := mustCall("POST", lcCheck, tok, tc.body)
			Expect(answer).To(HaveKeyWithValue("is_half_hourly_settled", false), "%v", tc.body)
			Expect(answer["propositions"]).To(HaveLen(3))
			for i, p := range answer["propositions"].([]any) {
				Expect(p).To(HaveKeyWithValue("proposition", allPropositionNames[i]), "the API's order")
			}
			Expect(lcVerdicts(Default, answer)).To(Equal(tc.want), "%v", tc.body)
		}
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before), "a check stores nothing")
		Expect(sitesIn(ctx, o.Namespace)).To(HaveLen(1))
	})

	It("agrees with the site's status: its half-hourly settlement and consent, and an installed asset of the model",
		func(ctx SpecContext) {
			const mpan = "1200000000011"
			siteID := onboardedSite(tok, mpan)
			faultSettled(ctx, o.Namespace, mpan, flexv1.PropositionLimitedPause)
			record := mustCall("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
			charger := entityAssetEligibility(record, "charger-"+mpan)
			answer := mustCall("POST", lcCheck, tok, map[string]any{"mpan": mpan, "asset_model": "zappi"})
			Expect(answer["propositions"]).To(Equal(charger["propositions"]), "the onboarded charger is a zappi, installed")
			Expect(answer["is_half_hourly_settled"]).To(Equal(record["site_properties"].(map[string]any)["is_half_hourly_settled"]))

			By("reading half-hourly settlement from the stored site (set with kubectl): the boundary meter qualifies without a model")
			Expect(lcVerdicts(Default, mustCall("POST", lcCheck, tok, map[string]any{"mpan": mpan}))).To(Equal(lcAll([]any{"asset_model_not_set"})))
			Eventually(func(g Gomega) {
				site := entityStoredSite(g, ctx, o.Namespace, mpan)
				site.Spec.HalfHourlySettled = true
				g.Expect(k8sClient.Update(ctx, site)).To(Succeed())
			}).Should(Succeed())
			Eventually(func(g Gomega) {
				answer := mustCallG(g, "POST", lcCheck, tok, map[string]any{"mpan": mpan})
				g.Expect(answer).To(HaveKeyWithValue("is_half_hourly_settled", true))
				g.Expect(lcVerdicts(g, answer)).To(Equal(lcAll("eligible")))
			}).Should(Succeed())
			Expect(lcVerdicts(Default, mustCall("POST", lcCheck, tok, map[string]any{"mpan": mpan, "asset_model": "generic_heat_pump"}))).
				To(Equal(lcAll("eligible")), "whatever the model")
			Eventually(func(g Gomega) any {
				return mustCallG(g, "GET", "/entities/site/"+siteID+"/eligibility", tok, nil)["site_properties"]
			}).Should(HaveKeyWithValue("is_half_hourly_settled", true))

			By("not seeing another organisation's site with the same MPAN")
			other := newOrg(ctx)
			answer = mustCall("POST", lcCheck, other.token(), map[string]any{"mpan": mpan})
			Expect(answer).To(HaveKeyWithValue("is_half_hourly_settled", false))
			Expect(lcVerdicts(Default, answer)).To(Equal(lcAll([]any{"asset_model_not_set"})))
		})

	It("answers 404 for an unknown asset model and 422 for a missing or malformed MPAN, storing nothing", func(ctx SpecContext) {
		before := snapshot(Default, ctx, o.Namespace)
		status, resp := call("POST", lcCheck, tok, map[string]any{"mpan": "1200000000011", "asset_model": "no-such-model"})
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(ContainSubstring("no-such-model"))

		status, resp = call("POST", lcCheck, tok, map[string]any{"asset_model": "zappi"})
		expectValidationItem(status, resp, []any{"body", "mpan"}, "missing")
		status, resp = call("POST", lcCheck, tok, map[string]any{"mpan": "1234567890123"})
		expectValidationItem(status, resp, []any{"body", "mpan"}, "")
		Expect(resp.String()).To(ContainSubstring("check digit"))
		status, resp = call("POST", lcCheck, tok, map[string]any{"mpan": "12345"})
		expectValidationItem(status, resp, []any{"body", "mpan"}, "")
		status, resp = call("POST", lcCheck, tok, map[string]any{"mpan": 1200000000011})
		expectValidationItem(status, resp, []any{"body", "mpan"}, "string_type")
		status, resp = call("POST", lcCheck, tok, map[string]any{"mpan": "1200000000011", "asset_model": 7})
		expectValidationItem(status, resp, []any{"body", "asset_model"}, "string_type")
		status, resp = call("POST", lcCheck, tok, raw(`{"mpan":`))
		entityExpectInvalid(status, resp, "json_invalid")
		status, resp = call("POST", lcCheck, tok, raw(`[]`))
		expectValidationItem(status, resp, []any{"body"}, "model_attributes_type")
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})
})

var _ = Describe("POST /entities/site/{site_id}/dispatch-consent and …/dispatch-deconsent", func() {
	var (
		o   org
		tok string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
	})
	consent := func(id string) string { return "/entities/site/" + id + "/dispatch-consent" }
	deconsent := func(id string) string { return "/entities/site/" + id + "/dispatch-deconsent" }
	methods := func(m ...any) map[string]any { return map[string]any{"dispatch_methods": append([]any{}, m...)} }
	stored := func(ctx context.Context, mpan string) []flexv1.DispatchMethod {
		return entityStoredSite(Default, ctx, o.Namespace, mpan).Spec.DispatchMethods
	}
	// counted sends a request through a server instance that counts its writes.
	counted := func(path string, body any) (map[string]any, []string) {
		GinkgoHelper()
		counter := newFaultClient(faultServerError, 0)
		url, done := faultyFacade(counter, nil, faultInFlightTimeout)
		defer done()
		a := relPost(relHTTP, url, path, tok, body)
		Expect(a.status).To(Equal(http.StatusOK), "%s", a)
		writes, _ := counter.state()
		return a.json(), writes
	}

	It("adds and removes dispatch methods, answers the legacy site record, and writes only a change", func(ctx SpecContext) {
		const mpan = "1200000000011"
		answer := entityInitialise(tok, mpan)
		id := entitySiteID(answer)
		faultSettled(ctx, o.Namespace, mpan)

		record := mustCall("POST", consent(id), tok, methods("limited_pause", "cm_infrequent_dispatch"))
		Expect(record).To(gstruct.MatchAllKeys(gstruct.Keys{
			"id": Equal(id), "mpan": Equal(mpan), "postcode": Equal("SW1A 1AA"), "address": Equal("10 Downing Street"),
			"asset_ids": ConsistOf(entityAssetIDs(answer)...), "markets": BeEmpty(),
			"dispatch_methods":               Equal([]any{"limited_pause", "cm_infrequent_dispatch"}),
			"gave_boundary_meter_consent_at": Equal("2026-01-15T10:30:00Z"),
		}))
		Expect(stored(ctx, mpan)).To(Equal([]flexv1.DispatchMethod{"limited_pause", "cm_infrequent_dispatch"}))
		Expect(mustCall("GET", "/entities/site/"+id, tok, nil)).To(Equal(record), "a read straight after sees the change")

		By("adding to what is stored, keeping its order")
		record = mustCall("POST", consent(id), tok, methods("vpp_limited_control", "limited_pause"))
		Expect(record["dispatch_methods"]).To(Equal([]any{"limited_pause", "cm_infrequent_dispatch", "vpp_limited_control"}))

		By("writing nothing when nothing changes")
		// The Site controller writes the status of the changed spec; wait for it first.
		var rv string
		Eventually(func(g Gomega) {
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
			g.Expect(site.Status.ObservedGeneration).To(Equal(site.Generation))
			ready := meta.FindStatusCondition(site.Status.Conditions, flexv1.ReadyCondition)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.ObservedGeneration).To(Equal(site.Generation))
			rv = site.ResourceVersion
		}).Should(Succeed())
		for _, call := range []struct {
			path string
			body map[string]any
		}{
			{consent(id), methods("cm_infrequent_dispatch", "limited_pause")},
			{consent(id), methods()},
			{deconsent(id), methods("full_asset_schedule_control")},
			{deconsent(id), methods()},
		} {
			again, writes := counted(call.path, call.body)
			Expect(writes).To(BeEmpty(), "%s %v", call.path, call.body)
			Expect(again).To(Equal(record))
		}
		Expect(entityStoredSite(Default, ctx, o.Namespace, mpan).ResourceVersion).To(Equal(rv))

		By("removing methods, keeping the order of the rest, in one write")
		record, writes := counted(deconsent(id), methods("limited_pause", "full_asset_schedule_control"))
		Expect(writes).To(Equal([]string{"Patch Site/" + identity.SiteNameForMPAN(mpan)}))
		Expect(record["dispatch_methods"]).To(Equal([]any{"cm_infrequent_dispatch", "vpp_limited_control"}))
		Expect(stored(ctx, mpan)).To(Equal([]flexv1.DispatchMethod{"cm_infrequent_dispatch", "vpp_limited_control"}))
		record = mustCall("POST", deconsent(id), tok, methods("cm_infrequent_dispatch", "vpp_limited_control"))
		Expect(record["dispatch_methods"]).To(BeEmpty())
		Expect(stored(ctx, mpan)).To(BeEmpty())

		By("changing nothing else: the other fields, the assets, the enrolments")
		site := entityStoredSite(Default, ctx, o.Namespace, mpan)
		Expect(site.Spec.Markets).To(BeEmpty())
		Expect(entityEnrolmentsOf(Default, ctx, o.Namespace, site.Name)).To(BeEmpty())
	})

	It("extends the consent the legacy onboard recorded", func(ctx SpecContext) {
		const mpan = "2301234567894"
		legacy := mustCall("POST", "/entities/site/onboard-site-and-asset", tok, legacyOnboardBody(mpan, "legacy-dc"))
		id := legacy["site"].(map[string]any)["id"].(string)
		Expect(legacy["site"]).To(HaveKeyWithValue("dispatch_methods", []any{"cm_infrequent_dispatch", "limited_pause"}))
		record := mustCall("POST", consent(id), tok, methods("full_asset_schedule_control"))
		Expect(record["dispatch_methods"]).To(Equal([]any{"cm_infrequent_dispatch", "limited_pause", "full_asset_schedule_control"}))
		Expect(record["markets"]).To(Equal([]any{"cm"}))
	})

	It("lets the site's own end user change its consent, and nobody else's", func(ctx SpecContext) {
		const consentAt = "gave_boundary_meter_consent_at"
		tokUser := mustCall("POST", "/auth/component-token", tok, componentForm("dc-user", consentAt, "2026-01-15T10:30:00Z"))["access_token"].(string)
		mine := userSite(ctx, o.Namespace, "dc-user")
		mustCall("POST", "/auth/component-token", tok, componentForm("dc-neighbour", consentAt, "2026-01-15T10:30:00Z"))
		neighbour := userSite(ctx, o.Namespace, "dc-neighbour")
		mineID, neighbourID := mine.Labels[flexv1.IDLabel], neighbour.Labels[flexv1.IDLabel]

		record := mustCall("POST", consent(mineID), tokUser, methods("limited_pause"))
		Expect(record).To(HaveKeyWithValue("dispatch_methods", []any{"limited_pause"}))
		Expect(mustCall("POST", deconsent(mineID), tokUser, methods("limited_pause"))).To(HaveKeyWithValue("dispatch_methods", BeEmpty()))

		before := snapshot(Default, ctx, o.Namespace)
		for _, p := range []string{consent(neighbourID), deconsent(neighbourID)} {
			status, resp := call("POST", p, tokUser, methods("limited_pause"))
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
			Expect(resp.Detail()).To(Equal(notFoundSite))
		}
		Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
	})

	It("answers 404 for an unknown site or another organisation's, and 422 for a bad body or id, changing nothing",
		func(ctx SpecContext) {
			const mpan = "1200000000011"
			id := entitySiteID(entityInitialise(tok, mpan))
			mustCall("POST", consent(id), tok, methods("limited_pause"))
			faultSettled(ctx, o.Namespace, mpan)
			other := newOrg(ctx)
			otherTok := other.token()
			otherID := entitySiteID(entityInitialise(otherTok, mpan))
			before, otherBefore := snapshot(Default, ctx, o.Namespace), snapshot(Default, ctx, other.Namespace)

			for _, p := range []func(string) string{consent, deconsent} {
				status, resp := call("POST", p(otherID), tok, methods("cm_infrequent_dispatch"))
				Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
				Expect(resp.Detail()).To(Equal(notFoundSite))
				status, resp = call("POST", p(uuid.NewString()), tok, methods("cm_infrequent_dispatch"))
				Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
				status, resp = call("POST", p("not-a-uuid"), tok, methods("cm_infrequent_dispatch"))
				expectValidationItem(status, resp, []any{"path", "site_id"}, "uuid_parsing")

				status, resp = call("POST", p(id), tok, map[string]any{})
				expectValidationItem(status, resp, []any{"body", "dispatch_methods"}, "missing")
				status, resp = call("POST", p(id), tok, map[string]any{"dispatch_methods": nil})
				expectValidationItem(status, resp, []any{"body", "dispatch_methods"}, "missing")
				status, resp = call("POST", p(id), tok, map[string]any{"dispatch_methods": "limited_pause"})
				expectValidationItem(status, resp, []any{"body", "dispatch_methods"}, "list_type")
				status, resp = call("POST", p(id), tok, methods("limited_pause", "flex_lite"))
				expectValidationItem(status, resp, []any{"body", "dispatch_methods", float64(1)}, "enum")
				status, resp = call("POST", p(id), tok, methods("cm_infrequent_dispatch", 3))
				expectValidationItem(status, resp, []any{"body", "dispatch_methods", float64(1)}, "string_type")
				status, resp = call("POST", p(id), tok, methods("cm_infrequent_dispatch", "limited_pause", "cm_infrequent_dispatch"))
				expectValidationItem(status, resp, []any{"body", "dispatch_methods", float64(2)}, "value_error")
				Expect(resp.String()).To(ContainSubstring("unique"))
				status, resp = call("POST", p(id), tok, raw(`[]`))
				expectValidationItem(status, resp, []any{"body"}, "model_attributes_type")
			}
			Expect(snapshot(Default, ctx, o.Namespace)).To(Equal(before))
			Expect(snapshot(Default, ctx, other.Namespace)).To(Equal(otherBefore))
		})

	It("answers 404 for a site on its way out", func(ctx SpecContext) {
		const mpan = "1200000000011"
		id := onboardedSite(tok, mpan)
		faultSettled(ctx, o.Namespace, mpan, flexv1.PropositionLimitedPause)
		mustCall("POST", "/entities/site/"+id+"/offboard-site-and-assets", tok, nil)
		status, resp := call("POST", consent(id), tok, methods("limited_pause"))
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})
})
