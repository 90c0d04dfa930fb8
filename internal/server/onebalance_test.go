package server_test

import (
	"fmt"
	"net/http"
	"net/url"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/rewardstore"
)

// The balance is summed once, in SQL (rewardstore.Store.Balance). Every door reads that sum:
// the REST API's /info (from the RewardLedger summary the controller copies from it, its own
// writes read back from SQL), the hosted rewards page, and the REST transactions' verdicts. Before, the page and the summary summed the history in Go,
// a second home that could drift from the SQL the REST API read.
var _ = Describe("One balance", func() {
	It("is the same through /info, the hosted rewards page, the transactions and the database, after credits, a withdrawal and its rejection", func(ctx SpecContext) {
		o := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleRewards, flexv1.RoleRewardsWrite,
			flexv1.RoleRewardsAdmin)
		tok := o.token()
		siteID := mustCall("POST", "/entities/site/onboard", tok, household("1200000000011"))["site"].(map[string]any)["site_id"].(string)
		siteName := identity.SiteNameForMPAN("1200000000011")
		store := &rewardstore.Store{Pool: testDB.Pool}
		key := rewardstore.Site{Namespace: o.Namespace, ID: siteID}
		daysAgo := func(n int) metav1.Time {
			return metav1.NewTime(clock.Load().Add(-time.Duration(n) * 24 * time.Hour).UTC().Truncate(time.Second))
		}
		newPage := func() page {
			GinkgoHelper()
			link := mustCall("GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=false&redirect_uri="+
				url.QueryEscape("https://app.example.com/done"), tok, nil)["balance_withdrawal_url"].(string)
			p := newBrowser().do("GET", link, nil)
			Expect(p.status).To(Equal(http.StatusOK), p.body)
			return p
		}
		agree := func(pence int64) {
			GinkgoHelper()
			shown := fmt.Sprintf(`<dd id="balance">£%d.%02d</dd>`, pence/100, pence%100)
			Eventually(func(g Gomega) {
				b, err := store.Balance(ctx, key)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(b.Current).To(Equal(pence), "the database's sum")
				g.Expect(mustCallG(g, "GET", "/rewards/"+siteID+"/info", tok, nil)).
					To(HaveKeyWithValue("current_balance_pence", BeEquivalentTo(pence)), "/info")
				g.Expect(mustCallG(g, "GET", "/rewards/"+siteID+"/transactions", tok, nil)).
					To(HaveKeyWithValue("is_below_withdrawal_minimum", pence < 1000), "the transactions' verdict")
				g.Expect(newPage().body).To(ContainSubstring(shown), "the hosted rewards page")
			}).Should(Succeed())
		}

		By("a rewards system's credit through the ledger's spec, an API client's, and a settlement's")
		start := daysAgo(40)
		Expect(k8sClient.Create(ctx, &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)},
			Spec: flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: []flexv1.RewardTransaction{
				{ID: identity.NewID(), Type: "flex event", CreditPence: 2500, StartTime: &start}}},
		})).To(Succeed())
		at := daysAgo(35)
		status, resp := call("POST", "/rewards/"+siteID+"/transactions", tok, map[string]any{"transaction_id": identity.NewID(),
			"transaction_type": "flex event", "credit_pence": 700, "start_time": at.Format(time.RFC3339),
			"settlement_date": at.Format(time.DateOnly)})
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		settled := daysAgo(33)
		_, _, err := store.Append(ctx, key, flexv1.RewardTransaction{ID: identity.NewID(), Type: "flex event", CreditPence: 300,
			StartTime: &settled}, rewardstore.SourceSettlement)
		Expect(err).NotTo(HaveOccurred())
		agree(3500)

		By("the household withdrawing the whole balance on the rewards page")
		b := newBrowser()
		link := mustCall("GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=false&redirect_uri="+
			url.QueryEscape("https://app.example.com/done"), tok, nil)["balance_withdrawal_url"].(string)
		p := b.do("GET", link, nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		p = b.do("POST", "/hosted/rewards/bank", url.Values{"csrf_token": {p.csrf()}, "account_name": {"Ada Lovelace"},
			"sort_code": {"65-43-21"}, "account_number": {"12345678"}})
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.body).To(ContainSubstring("Withdraw £35.00"))
		p = b.do("POST", "/hosted/rewards/withdraw", url.Values{"csrf_token": {p.csrf()}})
		Expect(p.status).To(Equal(http.StatusSeeOther), p.body)
		txs := mustCall("GET", "/rewards/"+siteID+"/transactions", tok, nil)["transactions"].([]any)
		withdrawal := txs[0].(map[string]any)
		Expect(withdrawal).To(And(HaveKeyWithValue("transaction_type", "withdrawal"), HaveKeyWithValue("credit_pence", -3500.0)))
		// This replica's own write: /info reads it back at once, before the summary shows it.
		Expect(mustCall("GET", "/rewards/"+siteID+"/info", tok, nil)).To(HaveKeyWithValue("current_balance_pence", 0.0))
		agree(0)

		By("the platform team rejecting the withdrawal: the money is the household's again, everywhere")
		status, resp = call("PATCH", "/rewards/"+siteID+"/transactions/"+withdrawal["transaction_id"].(string), tok,
			map[string]any{"payment_status": "rejected"})
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		agree(3500)
	})
})
