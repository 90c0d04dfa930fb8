package delivery_test

import (
	"context"
	"encoding/json"
	"net/http"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/testenv"
)

// restToken makes an organisation with an API client holding every role and answers its token.
func restToken(ctx context.Context, ns string) string {
	o := bootstrap.Organisation{Namespace: ns, Username: "rest-" + ns, Password: "rest-password-" + ns,
		Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents}}
	Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, o)).To(Succeed())
	var tok string
	Eventually(func(g Gomega) {
		status, body, err := testenv.Call(apiServer.URL, "POST", "/auth/token-form", "",
			testenv.Form{"username": o.Username, "password": o.Password, "grant_type": "password"})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "%s", body)
		var resp map[string]any
		g.Expect(json.Unmarshal(body, &resp)).To(Succeed())
		tok = resp["access_token"].(string)
	}).Should(Succeed())
	return tok
}

// rest calls the REST API and answers the status and decoded body.
func rest(method, path, token string, body any) (int, map[string]any) {
	status, data, err := testenv.Call(apiServer.URL, method, path, token, body)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	var resp map[string]any
	_ = json.Unmarshal(data, &resp)
	return status, resp
}

var _ = Describe("Notifications through the REST API", func() {
	It("makes the same events as the same changes through the Kubernetes API, and delivers a test ping", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		tok := restToken(ctx, ns)
		r := newReceiver()

		By("a subscription made through REST, with the secret it answers once")
		status, created := rest("POST", "/notifications/subscriptions", tok, map[string]any{"url": r.URL})
		Expect(status).To(Equal(http.StatusCreated), "%v", created)
		r.setSecret(created["secret"].(string))
		sub := &flexv1.Subscription{}
		Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: ns, Name: created["id"].(string)}, sub)).To(Succeed())
		ready(ctx, sub)

		By("a test ping")
		status, _ = rest("POST", "/notifications/subscriptions/"+sub.Name+"/test", tok, nil)
		Expect(status).To(Equal(http.StatusAccepted))
		Eventually(r.kinds).Should(Equal([]string{"ping"}))

		By("onboard with an enrolment")
		status, onboarded := rest("POST", "/entities/site/onboard", tok, map[string]any{
			"site": map[string]any{"mpan": "1200000000011", "postcode": "SW1A 1AA", "street_address": "1 Test Street"},
			"assets": []any{map[string]any{"external_id": "rest-charger", "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
			"proposition": "limited_pause"})
		Expect(status).To(Equal(http.StatusOK), "%v", onboarded)
		siteID := onboarded["site"].(map[string]any)["site_id"].(string)
		assetID := onboarded["assets"].([]any)[0].(map[string]any)["asset_id"].(string)
		Eventually(r.kinds).Should(ContainElements("asset.changed:created", "site.eligibility_changed", "enrolment.changed:active"))

		By("an asset PATCH that breaks eligibility")
		n := len(r.kinds())
		status, _ = rest("PATCH", "/entities/asset/"+assetID, tok, map[string]any{"asset_model": "legacy_charger"})
		Expect(status).To(Equal(http.StatusOK))
		Eventually(func() []string { return r.kinds()[n:] }).Should(ContainElements(
			"asset.changed:updated", "site.eligibility_changed", "enrolment.changed:not_eligible"))

		By("a PATCH that changes nothing: nothing")
		n = len(r.all())
		status, _ = rest("PATCH", "/entities/asset/"+assetID, tok, map[string]any{"asset_model": "legacy_charger"})
		Expect(status).To(Equal(http.StatusOK))

		By("unenrol, delete the asset, offboard")
		status, _ = rest("POST", "/entities/site/"+siteID+"/unenrol", tok, map[string]any{"proposition": "limited_pause"})
		Expect(status).To(Equal(http.StatusOK))
		Eventually(r.kinds).Should(ContainElement("enrolment.changed:removed"))
		// A site's events arrive in order: an event of the PATCH that changed nothing would have
		// come before the removal, which has arrived.
		Expect(r.kinds()[n:]).NotTo(ContainElement("asset.changed:updated"), "events after the PATCH that changed nothing")
		status, _ = rest("DELETE", "/entities/asset/"+assetID, tok, nil)
		Expect(status).To(Equal(http.StatusNoContent))
		Eventually(r.kinds).Should(ContainElement("asset.changed:deleted"))
		status, _ = rest("POST", "/entities/site/"+siteID+"/offboard-site-and-assets", tok, nil)
		Expect(status).To(Equal(http.StatusOK))
		Eventually(r.kinds).Should(ContainElement("site.offboarded"))

		got := r.delivered()
		for _, g := range got {
			Expect(g.Verified).To(BeTrue(), "event %s verifies with the Standard Webhooks library", g.ID)
		}
		inOrder(got)

		By("the recent deliveries, through REST")
		Eventually(func(g Gomega) int {
			_, data, err := testenv.Call(apiServer.URL, "GET", "/notifications/subscriptions/"+sub.Name+"/deliveries", tok, nil)
			g.Expect(err).NotTo(HaveOccurred())
			var d map[string]any
			g.Expect(json.Unmarshal(data, &d)).To(Succeed())
			list, _ := d["deliveries"].([]any)
			return len(list)
		}).Should(BeNumerically(">=", 10))
	})
})
