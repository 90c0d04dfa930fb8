package server_test

import (
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// The rules are built once per catalogue change, not per request: an eligibility answer
// follows a change of the AssetModel catalogue as soon as the REST API's cache has seen it.
var _ = Describe("GET /entities/site/{site_id}/eligibility after a catalogue change", func() {
	It("follows an AssetModel's CoP11 qualification both ways", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		model := &flexv1.AssetModel{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "api-catalogue-"},
			Spec:       flexv1.AssetModelSpec{ModelName: "catalogue-" + o.Namespace},
		}
		Expect(k8sClient.Create(ctx, model)).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(client.IgnoreNotFound(k8sClient.Delete(ctx, model))).To(Succeed()) })

		// Initialise takes the model once the REST API's cache has seen it.
		body := entityInitialiseBody("1200000000011", func(b map[string]any) {
			b["assets"] = []any{map[string]any{"external_id": "catalogue-battery", "type": "battery",
				"asset_model": model.Spec.ModelName, "installation_date": "2025-03-01"}}
		})
		var siteID string
		Eventually(func(g Gomega) {
			status, resp := call("POST", "/entities/site/initialise", tok, body)
			g.Expect(status).To(Equal(http.StatusOK), "initialise: %s", resp)
			siteID = entitySiteID(resp.MapG(g))
		}).Should(Succeed())
		issues := func(g Gomega) []any {
			status, resp := call("GET", "/entities/site/"+siteID+"/eligibility", tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			var out []any
			for _, a := range resp.Map()["assets"].([]any) {
				for _, p := range a.(map[string]any)["propositions"].([]any) {
					out = append(out, p.(map[string]any)["issues"].([]any)...)
				}
			}
			return out
		}
		Eventually(issues).Should(ContainElement(string(flexv1.IssueAssetModelNotCoP11Qualified)))

		By("qualifying the model")
		base := model.DeepCopy()
		model.Spec.CoP11Qualified = true
		Expect(k8sClient.Patch(ctx, model, client.MergeFrom(base))).To(Succeed())
		Eventually(issues).Should(BeEmpty())

		By("withdrawing the qualification again")
		base = model.DeepCopy()
		model.Spec.CoP11Qualified = false
		Expect(k8sClient.Patch(ctx, model, client.MergeFrom(base))).To(Succeed())
		Eventually(issues).Should(ContainElement(string(flexv1.IssueAssetModelNotCoP11Qualified)))
	})
})
