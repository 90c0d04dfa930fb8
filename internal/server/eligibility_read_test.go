package server_test

import (
	"io"
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
)

// GET eligibility serves the Site controller's evaluation, the one there is: a client that
// wrote through the API reads its own write in the very next request (no Eventually), as
// when every read evaluated afresh, and the answer is the site's status.
var _ = Describe("GET /entities/site/{site_id}/eligibility reads its own writes", func() {
	It("answers an asset added, and one deleted, in the very next read, from the site's status", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		mpan := validMPAN(9302)
		siteID := entitySiteID(entityInitialise(tok, mpan))
		path := "/entities/site/" + siteID + "/eligibility"
		read := func() map[string]any {
			status, resp := call("GET", path, tok, nil)
			ExpectWithOffset(1, status).To(Equal(http.StatusOK), "%s", resp)
			return resp.Map()
		}
		externalIDs := func(rec map[string]any) []any {
			assets := rec["assets"].([]any)
			out := make([]any, 0, len(assets))
			for _, a := range assets {
				out = append(out, a.(map[string]any)["external_id"])
			}
			return out
		}
		Expect(externalIDs(read())).NotTo(ContainElement("ryw-battery"))

		By("adding an asset")
		status, created := call("POST", "/entities/asset", tok, createAssetBody(siteID, "ryw-battery"))
		Expect(status).To(Equal(http.StatusOK), "%s", created)
		Expect(externalIDs(read())).To(ContainElement("ryw-battery"), "the asset just added")

		By("the answer being the Site controller's evaluation")
		site := entityStoredSite(Default, ctx, o.Namespace, mpan)
		Expect(site.Name).To(Equal(identity.SiteNameForMPAN(mpan)))
		Expect(site.Status.EvaluatedFrom.Assets).NotTo(BeEmpty())
		Expect(read()).To(Equal(entityStatusRecord(Default, site)))

		By("deleting it")
		status, resp := call("DELETE", "/entities/asset/"+created.Map()["id"].(string), tok, nil)
		Expect(status).To(BeNumerically("<", 300), "%s", resp)
		Expect(externalIDs(read())).NotTo(ContainElement("ryw-battery"), "the asset just deleted")
	})

	It("waits for a status behind the site, and answers 503 with Retry-After when none comes", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		mpan := validMPAN(9303)
		siteID := entitySiteID(entityInitialise(tok, mpan))
		path := "/entities/site/" + siteID + "/eligibility"
		Expect(mustCall("GET", path, tok, nil)).NotTo(BeNil())

		By("a status that does not say what it was computed from (as one written before evaluatedFrom)")
		// Another spec's catalogue change can wake every Site controller's evaluation between
		// the stale write and the read (and the read is then rightly a 200): write it again
		// until a read meets it.
		Eventually(func(g Gomega) {
			stale := entityStoredSite(g, ctx, o.Namespace, mpan).DeepCopy()
			stale.Status.EvaluatedFrom = flexv1.EligibilityInputs{}
			g.Expect(k8sClient.Status().Update(ctx, stale)).To(Succeed())
			// The server reads its cache: the read meets the stale status once the cache
			// holds it, not before.
			g.Eventually(func(g Gomega) {
				cached := &flexv1.Site{}
				g.Expect(serverCache.Get(ctx, client.ObjectKeyFromObject(stale), cached)).To(Succeed())
				g.Expect(cached.ResourceVersion).To(Equal(stale.ResourceVersion))
			}).Should(Succeed())
			// A status-only write does not wake the Site controller: nothing evaluates the
			// site again, and the read cannot tell the status is current.
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, apiServer.URL+path, nil)
			g.Expect(err).NotTo(HaveOccurred())
			req.Header.Set("Authorization", "Bearer "+tok)
			got, err := http.DefaultClient.Do(req)
			g.Expect(err).NotTo(HaveOccurred())
			body, err := io.ReadAll(got.Body)
			g.Expect(got.Body.Close()).To(Succeed())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.StatusCode).To(Equal(http.StatusServiceUnavailable), "%s", body)
			g.Expect(response(body).Detail()).To(BeAssignableToTypeOf(""))
			g.Expect(got.Header.Get("Retry-After")).NotTo(BeEmpty())
		}).WithTimeout(2 * time.Minute).Should(Succeed())

		By("the site's next evaluation")
		s := entityStoredSite(Default, ctx, o.Namespace, mpan)
		if s.Labels == nil {
			s.Labels = map[string]string{}
		}
		s.Labels["flexsite.io/test-touch"] = "1" // a label change wakes the Site controller
		Expect(k8sClient.Update(ctx, s)).To(Succeed())
		Eventually(func() int { st, _ := call("GET", path, tok, nil); return st }).Should(Equal(http.StatusOK))
	})
})
