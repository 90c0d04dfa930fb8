package browser_test

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/test/browser"
)

var _ = Describe("The household's next charging window in Chromium", func() {
	It("says when the car will charge on the rewards page and in the hosted flow's rewards step", func(ctx SpecContext) {
		if testDB == nil {
			Skip("no PostgreSQL: the prices and the schedules live there")
		}
		o := newOrg(ctx)
		orgToken := o.token()
		const user, mpan = "household-charging", "1200000000011"
		siteID, token := o.componentToken(orgToken, user, embedder.Origin())
		status, body := call(Default, "POST", "/entities/site/initialise", orgToken, map[string]any{
			"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "external_user_id": user,
				"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
			"assets": []any{map[string]any{"external_id": "charging-charger", "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}}})
		Expect(status).To(Equal(http.StatusOK), "%v", body)
		chargerID := body["assets"].([]any)[0].(map[string]any)["asset_id"].(string)
		Eventually(func(g Gomega) int {
			status, _ := call(g, "POST", "/entities/site/"+siteID+"/enrol", orgToken, map[string]any{"proposition": "price_curve"})
			return status
		}).Should(Equal(http.StatusOK))
		Eventually(func(g Gomega) {
			list := &flexv1.EnrolmentList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(o.Namespace))).To(Succeed())
			g.Expect(list.Items).To(ContainElement(And(
				HaveField("Spec.Proposition", flexv1.PropositionPriceCurve), HaveField("Status.Phase", flexv1.EnrolmentActive))))
		}).Should(Succeed())
		status, body = call(Default, "POST", "/entities/site/"+siteID+"/dispatch-consent", orgToken, map[string]any{"dispatch_methods": []any{"limited_pause"}})
		Expect(status).To(Equal(http.StatusOK), "%v", body)

		By("a schedule answered for tomorrow night, 02:00–03:00 UK time, priced")
		tomorrow := prices.Tomorrow(time.Now())
		_, err := (&pricestore.Store{Pool: testDB.Pool}).Put(ctx, o.Namespace, "price_curve", tomorrow, []prices.Price{
			{Start: tomorrow.At(2, 0), Centi: 1000}, {Start: tomorrow.At(2, 30), Centi: 1500}}, "test", time.Now())
		Expect(err).NotTo(HaveOccurred())
		schedule := map[string]any{"charging_schedule": []any{map[string]any{
			"start_timestamp": tomorrow.At(2, 0).Format(time.RFC3339), "end_timestamp": tomorrow.At(3, 0).Format(time.RFC3339)}}}
		Eventually(func(g Gomega) int {
			status, _ := call(g, "POST", "/entities/asset/"+chargerID+"/event/plug-in-schedule", orgToken, schedule)
			return status
		}).Should(Equal(http.StatusOK))
		const want = "Your car will charge tomorrow 02:00–03:00, when energy is cheapest"

		By("the rewards page, without script")
		status, answer := call(Default, "GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=false&redirect_uri="+
			url.QueryEscape(embedder.Origin()+"/rewards-done"), orgToken, nil)
		Expect(status).To(Equal(http.StatusOK), "%v", answer)
		b := newBrowser()
		Expect(b.Do(step, chromedp.Navigate(answer["balance_withdrawal_url"].(string)),
			chromedp.WaitVisible(chromedp.CSS(".charging-window")))).To(Succeed())
		said, err := browser.Run(b, step, chromedp.TextContent(chromedp.CSS(".charging-window")))
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.TrimSpace(said)).To(Equal(want))
		vs, err := b.Axe(step)
		Expect(err).NotTo(HaveOccurred())
		Expect(browser.Serious(vs)).To(BeEmpty(), "axe-core on the rewards page's charging window")

		By("the hosted flow's rewards step, in the same words")
		f := embed(b, token, "")
		f.atStep("rewards")
		Eventually(func(g Gomega) string { return strings.TrimSpace(f.text(g, "#rewards-charging")) }).Should(Equal(want))
		f.checkPage("8-charging-window")
	})
})
