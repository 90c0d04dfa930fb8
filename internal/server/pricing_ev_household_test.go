package server_test

import (
	"net/http"
	"net/url"
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

var _ = Describe("The household's next charging window", func() {
	It("is said on the rewards page and in the hosted flow in the same words, for a price_curve household", func(ctx SpecContext) {
		o := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleComponents)
		tok := o.token()
		const mpan = "1200000000011"
		user := mustCall("POST", "/auth/component-token", tok, componentForm("charging-user", "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
		userTok, siteID := user["access_token"].(string), user["id"].(string)
		// The user's household gets its MPAN and charger from the organisation (initialise
		// naming the same user), joins price_curve and consents to limited_pause dispatch.
		mustCall("POST", "/entities/site/initialise", tok, map[string]any{
			"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "external_user_id": "charging-user"},
			"assets": []any{map[string]any{"external_id": "charger-" + mpan, "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}}})
		charger := mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		Eventually(func() int {
			status, _ := call("POST", "/entities/site/"+siteID+"/enrol", tok, map[string]any{"proposition": "price_curve"})
			return status
		}).Should(Equal(http.StatusOK))
		site := userSite(ctx, o.Namespace, "charging-user")
		entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.EnrolmentName(site.Name, flexv1.PropositionPriceCurve)})
		mustCall("POST", "/entities/site/"+siteID+"/dispatch-consent", tok, map[string]any{"dispatch_methods": []any{"limited_pause"}})

		By("a schedule answered for tomorrow night: 02:00–03:00 UK time, priced")
		tomorrow := prices.Tomorrow(serverNow())
		_, err := (&pricestore.Store{Pool: testDB.Pool}).Put(ctx, o.Namespace, "price_curve", tomorrow, []prices.Price{
			{Start: tomorrow.At(2, 0), Centi: 1000}, {Start: tomorrow.At(2, 30), Centi: 1500}}, "test", time.Now())
		Expect(err).NotTo(HaveOccurred())
		body := map[string]any{"charging_schedule": []any{map[string]any{
			"start_timestamp": tomorrow.At(2, 0).Format(time.RFC3339), "end_timestamp": tomorrow.At(3, 0).Format(time.RFC3339)}}}
		Eventually(func() int {
			status, _ := call("POST", "/entities/asset/"+charger+"/event/plug-in-schedule", tok, body)
			return status
		}).Should(Equal(http.StatusOK))
		const want = "Your car will charge tomorrow 02:00–03:00, when energy is cheapest"

		By("the hosted flow's rewards step")
		status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/rewards", userTok, nil,
			map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(response(data).Map()["charging_windows"]).To(Equal([]any{want}))

		By("the rewards page")
		answer := mustCall("GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=false&redirect_uri="+
			url.QueryEscape("https://app.example.com/done"), tok, nil)
		p := newBrowser().do("GET", answer["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.body).To(ContainSubstring(`<p class="charging-window">` + want + `</p>`))

		By("nothing once the household leaves price_curve")
		mustCall("POST", "/entities/site/"+siteID+"/unenrol", tok, map[string]any{"proposition": "price_curve"})
		Eventually(func(g Gomega) any {
			_, data, _ := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/rewards", userTok, nil,
				map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
			return response(data).MapG(g)["charging_windows"]
		}).Should(BeEmpty())
	})
})
