package server_test

import (
	"html"
	"net/http"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/testenv"
)

var _ = Describe("The household's two doors", func() {
	It("name a transaction in the same words and date it in UK time, a summer evening's credit on the next day", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		userTok, siteID, siteName := endUserSite(ctx, o, tok, "words-user")

		// 23:30 UTC on 30 June is 00:30 on 1 July in the UK (BST): the credit was earned on 1 July.
		evening := metav1.NewTime(time.Date(2026, 6, 30, 23, 30, 0, 0, time.UTC))
		winter := metav1.NewTime(time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC))
		Expect(k8sClient.Create(ctx, &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)},
			Spec: flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: []flexv1.RewardTransaction{
				{ID: identity.NewID(), Type: "signup bonus", CreditPence: 800, StartTime: &winter},
				{ID: identity.NewID(), Type: "flex event", CreditPence: 120, StartTime: &evening, SettlementDate: "2026-06-30"},
			}},
		})).To(Succeed())

		By("the hosted flow")
		var hosted []any
		Eventually(func(g Gomega) {
			status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/rewards", userTok, nil,
				map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), "%s", data)
			hosted, _ = response(data).MapG(g)["transactions"].([]any)
			g.Expect(hosted).To(HaveLen(2))
		}).Should(Succeed())
		want := []map[string]any{
			{"date": "1 July 2026", "description": "Flexibility event reward", "credit_pence": 120.0},
			{"date": "10 January 2026", "description": "Welcome bonus", "credit_pence": 800.0},
		}
		for i, w := range want {
			Expect(hosted[i]).To(Equal(w), "the hosted flow's transaction %d", i)
		}

		By("the rewards page")
		answer := mustCall("GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=false&redirect_uri="+
			url.QueryEscape("https://app.example.com/done"), tok, nil)
		p := newBrowser().do("GET", answer["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		for _, w := range want {
			Expect(p.body).To(ContainSubstring("<td>"+html.EscapeString(w["date"].(string))+"</td><td>"+
				html.EscapeString(w["description"].(string))+"</td>"), "the rewards page's row of %v", w)
		}
		Expect(p.body).NotTo(ContainSubstring("30 June 2026"))
		Expect(p.body).NotTo(ContainSubstring("Sign-up bonus"))
	})
})

// endUserSite is an end user of o with boundary meter consent (a component token), once the
// manager has made its Site: the user's token, the site's API id and its object name.
func endUserSite(ctx SpecContext, o org, tok, user string) (userTok, siteID, siteName string) {
	GinkgoHelper()
	answer := mustCall("POST", "/auth/component-token", tok, componentForm(user, "gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))
	userTok, siteID = answer["access_token"].(string), answer["id"].(string)
	sites := &flexv1.SiteList{}
	Eventually(func(g Gomega) []flexv1.Site {
		g.Expect(k8sClient.List(ctx, sites, client.InNamespace(o.Namespace), client.MatchingLabels{flexv1.IDLabel: siteID})).To(Succeed())
		return sites.Items
	}).Should(HaveLen(1))
	return userTok, siteID, sites.Items[0].Name
}
