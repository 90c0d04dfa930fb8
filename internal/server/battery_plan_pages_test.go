package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/testenv"
)

var _ = Describe("The battery's plan on the household's pages", func() {
	It("is drawn with the same sentence on the rewards page and in the hosted flow, once the site is actively enrolled "+
		"in full_asset_schedule_control", func(ctx SpecContext) {
		needDatabase()
		o := newOrg(ctx)
		tok := o.token()
		user := mustCall("POST", "/auth/component-token", tok, componentForm("battery-user", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userTok, siteID := user["access_token"].(string), user["id"].(string)
		mpan := batteryMPAN(2)
		mustCall("PATCH", "/entities/site/"+siteID, tok, map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "address": "1 Battery Road"})
		asset := func(body map[string]any) {
			GinkgoHelper()
			body["site_id"] = siteID
			mustCall("POST", "/entities/asset", tok, body)
		}
		asset(map[string]any{"external_id": "charger-b", "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}})
		asset(map[string]any{"external_id": "battery-b", "type": "battery", "properties": map[string]any{"power_kw": 5, "capacity_kwh": 5}})

		// Tomorrow's prices: 50.00, but 10.00 from 01:00 to 02:00 and 100.00 from 17:00 to 18:00.
		tomorrow := prices.Tomorrow(serverNow())
		_, err := (&pricestore.Store{Pool: database.Pool}).Put(ctx, o.Namespace, "full_asset_schedule_control", tomorrow, batteryDayPrices(tomorrow),
			"battery-pages-spec", time.Now())
		Expect(err).NotTo(HaveOccurred())
		const sentence = "Your battery will charge 01:00–02:00, when energy is cheapest, and power your home 17:00–18:00, when energy is dearest"

		rewards := func(g Gomega) map[string]any {
			status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/rewards", userTok, nil,
				map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), "%s", data)
			return response(data).Map()
		}
		By("no plan before the site is enrolled in full_asset_schedule_control")
		Eventually(func(g Gomega) { g.Expect(rewards(g)["battery_plans"]).To(Equal([]any{})) }).Should(Succeed())

		By("enrolling, and the controller making the enrolment active")
		mustCall("POST", "/entities/site/"+siteID+"/enrol", tok, map[string]any{"proposition": "full_asset_schedule_control"})
		sites := &flexv1.SiteList{}
		Expect(k8sClient.List(ctx, sites, client.InNamespace(o.Namespace), client.MatchingLabels{flexv1.IDLabel: siteID})).To(Succeed())
		Expect(sites.Items).To(HaveLen(1))
		entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace,
			Name: identity.EnrolmentName(sites.Items[0].Name, flexv1.PropositionFullAssetScheduleControl)})

		By("the hosted flow's rewards step")
		Eventually(func(g Gomega) {
			plans, _ := rewards(g)["battery_plans"].([]any)
			g.Expect(plans).To(HaveLen(1))
			plan := plans[0].(map[string]any)
			g.Expect(plan["sentence"]).To(Equal(sentence))
			g.Expect(plan["chart_svg"]).To(And(HavePrefix(`<svg class="battery-chart"`), ContainSubstring(`role="img"`),
				ContainSubstring(`class="charge_max"`), ContainSubstring(`class="discharge_max"`), ContainSubstring("<polyline")))
			g.Expect(plan["rows"]).To(ContainElements(map[string]any{"time": "01:00–02:00", "action": "Charge"},
				map[string]any{"time": "17:00–18:00", "action": "Power your home"}))
		}).Should(Succeed())

		By("the rewards page, in the same words")
		answer := mustCall("GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=false&redirect_uri="+
			url.QueryEscape("https://app.example.com/done"), tok, nil)
		p := newBrowser().do("GET", answer["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.body).To(ContainSubstring(`<p class="battery-sentence" id="battery-plan-1-sentence">` + sentence + `</p>`))
		Expect(strings.Count(p.body, `<svg class="battery-chart"`)).To(Equal(1))
		Expect(p.body).To(ContainSubstring("<tr><td>01:00–02:00</td><td>Charge</td></tr>"))
	})
})
