package server_test

import (
	"context"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// GET eligibility once kept its encoded answer per site while the site, its assets and the
// catalogue were unchanged; it now serves the Site controller's status once that counts what
// the REST API's cache holds. Either way a change made outside the API is in the very next
// read once the REST API's cache holds it (no Eventually on the read itself).
var _ = Describe("GET /entities/site/{site_id}/eligibility kept between reads", func() {
	It("answers a changed site, a changed asset and a deleted asset in the next read", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		mpan := validMPAN(9301)
		body := entityInitialise(tok, mpan)
		siteID := entitySiteID(body)
		path := "/entities/site/" + siteID + "/eligibility"
		read := func() map[string]any {
			status, resp := call("GET", path, tok, nil)
			ExpectWithOffset(1, status).To(Equal(http.StatusOK), "%s", resp)
			return resp.Map()
		}
		// cached waits until the REST API's cache holds an object that satisfies ok.
		cached := func(obj client.Object, ok func() bool) {
			EventuallyWithOffset(1, func(g Gomega) {
				g.Expect(serverCache.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
				g.Expect(ok()).To(BeTrue())
			}).Should(Succeed())
		}
		Eventually(func(g Gomega) { g.Expect(read()).To(Equal(body["eligibility"])) }).Should(Succeed())
		Expect(read()).To(Equal(body["eligibility"]), "the kept answer")

		By("withdrawing meter consent outside the API")
		Expect(read()["site_properties"]).To(HaveKeyWithValue("has_meter_consent", true))
		site := &flexv1.Site{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.SiteNameForMPAN(mpan)}, site)).To(Succeed())
		patch := client.MergeFrom(site.DeepCopy())
		site.Spec.BoundaryMeterConsentAt = nil
		Expect(k8sClient.Patch(ctx, site, patch)).To(Succeed())
		Eventually(func() bool { return !siteConsented(ctx, o.Namespace, mpan) }).Should(BeTrue())
		Expect(read()["site_properties"]).To(HaveKeyWithValue("has_meter_consent", false))

		By("changing the charger's model outside the API")
		charger := entityStoredAsset(ctx, o.Namespace, "charger-"+mpan)
		assetPatch := client.MergeFrom(charger.DeepCopy())
		charger.Spec.Model = "legacy_charger"
		Expect(k8sClient.Patch(ctx, charger, assetPatch)).To(Succeed())
		inCache := &flexv1.Asset{ObjectMeta: metav1.ObjectMeta{Namespace: charger.Namespace, Name: charger.Name}}
		cached(inCache, func() bool { return inCache.Spec.Model == "legacy_charger" })
		lp := entityPropositionEligibility(entityAssetEligibility(read(), "charger-"+mpan), "limited_pause")
		Expect(lp["issues"]).To(ContainElement("asset_model_enrol_eligibility_override"))

		By("deleting the charger outside the API")
		Expect(k8sClient.Delete(ctx, charger)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &flexv1.Asset{}
			err := serverCache.Get(ctx, client.ObjectKeyFromObject(charger), got)
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			g.Expect(err != nil || !got.DeletionTimestamp.IsZero()).To(BeTrue())
		}).Should(Succeed())
		for _, a := range read()["assets"].([]any) {
			Expect(a.(map[string]any)["external_id"]).NotTo(Equal("charger-"+mpan), "the deleted charger is still answered")
		}
	})
})

// siteConsented reports whether the REST API's cache holds the site with meter consent.
func siteConsented(ctx context.Context, ns, mpan string) bool {
	site := &flexv1.Site{}
	if err := serverCache.Get(ctx, client.ObjectKey{Namespace: ns, Name: identity.SiteNameForMPAN(mpan)}, site); err != nil {
		return false
	}
	return site.Spec.BoundaryMeterConsentAt != nil
}
