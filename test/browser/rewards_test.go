package browser_test

import (
	"io"
	"net/http"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/test/browser"
)

// emailedCodes returns the six-digit codes mailed to one address, oldest first.
func emailedCodes(to string) []string {
	GinkgoHelper()
	files, err := os.ReadDir(filepath.Join(mailDir, "new"))
	Expect(err).NotTo(HaveOccurred())
	var codes []string
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(mailDir, "new", f.Name()))
		Expect(err).NotTo(HaveOccurred())
		msg, err := mail.ReadMessage(strings.NewReader(string(data)))
		Expect(err).NotTo(HaveOccurred(), "an RFC 5322 message")
		if !strings.Contains(msg.Header.Get("To"), to) {
			continue
		}
		body, _ := io.ReadAll(msg.Body)
		if m := regexp.MustCompile(`\b([0-9]{6})\b`).FindStringSubmatch(string(body)); m != nil {
			codes = append(codes, m[1])
		}
	}
	return codes
}

var _ = Describe("The hosted rewards page in Chromium", func() {
	It("opens from the link, takes the emailed code and bank details, shows them masked, "+
		"withdraws, lands on redirect_uri, and refuses the link a second time", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		const mpan = "1400000000020"
		email := "household-" + o.Namespace + "@example.com"
		status, onboarded := call(Default, "POST", "/entities/site/onboard", tok, map[string]any{
			"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "email": email,
				"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
			"assets": []any{map[string]any{"external_id": "charger-" + o.Namespace, "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
			"proposition": "limited_pause",
		})
		Expect(status).To(Equal(http.StatusOK), "%v", onboarded)
		siteID := onboarded["site"].(map[string]any)["site_id"].(string)
		siteName := identity.SiteNameForMPAN(mpan)

		By("crediting the household £25.00 sixty days ago")
		earned := metav1.NewTime(time.Now().Add(-60 * 24 * time.Hour).UTC().Truncate(time.Second))
		Expect(k8sClient.Create(ctx, &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)},
			Spec: flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: []flexv1.RewardTransaction{
				{ID: identity.NewID(), Type: "flex event", CreditPence: 2500, StartTime: &earned}}},
		})).To(Succeed())
		Eventually(func(g Gomega) any {
			_, info := call(g, "GET", "/rewards/"+siteID+"/info", tok, nil)
			return info["can_withdraw"]
		}).Should(BeTrue())

		By("asking for the link as the organisation does")
		redirect := embedder.Origin() + "/rewards-done?household=" + url.QueryEscape(siteID)
		status, answer := call(Default, "GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=true&redirect_uri="+
			url.QueryEscape(redirect), tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%v", answer)
		link := answer["balance_withdrawal_url"].(string)
		Expect(link).To(HavePrefix(serverURL + "/hosted/rewards/link/"))

		b := newBrowser()
		text := func(sel string) string {
			GinkgoHelper()
			t, err := browser.Run(b, step, chromedp.TextContent(chromedp.CSS(sel)))
			Expect(err).NotTo(HaveOccurred())
			return strings.TrimSpace(t)
		}
		page := func() string {
			GinkgoHelper()
			html, err := browser.Run(b, step, chromedp.OuterHTML(chromedp.CSS("html")))
			Expect(err).NotTo(HaveOccurred())
			return html
		}
		noSerious := func(what string) {
			GinkgoHelper()
			vs, err := b.Axe(step)
			Expect(err).NotTo(HaveOccurred())
			Expect(browser.Serious(vs)).To(BeEmpty(), "axe-core on %s", what)
		}
		do := func(actions ...chromedp.Action[chromedp.Void]) {
			GinkgoHelper()
			Expect(b.Do(step, actions...)).To(Succeed())
		}

		By("opening the link: the page, with the balance, thresholds and history")
		do(chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("#balance")))
		Expect(text("#balance")).To(Equal("£25.00"))
		Expect(text("#withdraw-state")).To(Equal("You can withdraw your balance now."))
		Expect(page()).To(ContainSubstring("Flexibility event reward"))
		loc, err := browser.Run(b, step, chromedp.Location())
		Expect(err).NotTo(HaveOccurred())
		Expect(loc).To(Equal(serverURL+"/hosted/rewards"), "the code leaves the address bar")
		noSerious("the rewards page")

		By("emailing a code and confirming it from the Maildir")
		do(chromedp.Click(chromedp.CSS(`form[action="/hosted/rewards/code"] button`)), chromedp.WaitVisible(chromedp.CSS("#code")))
		codes := emailedCodes(email)
		Expect(codes).To(HaveLen(1))
		do(chromedp.SendKeys(chromedp.CSS("#code"), codes[0]),
			chromedp.Click(chromedp.CSS(`form[action="/hosted/rewards/verify"] button`)),
			chromedp.WaitVisible(chromedp.CSS("#account_number")))
		noSerious("the bank details form")

		By("telling a wrong sort code next to its field")
		do(chromedp.SendKeys(chromedp.CSS("#account_name"), "Ada Lovelace"),
			chromedp.SendKeys(chromedp.CSS("#sort_code"), "12-34"),
			chromedp.SendKeys(chromedp.CSS("#account_number"), "12345678"),
			chromedp.Click(chromedp.CSS(`form[action="/hosted/rewards/bank"] button`)),
			chromedp.WaitVisible(chromedp.CSS("#sort_code-error")))
		described, err := browser.Run(b, step, chromedp.Evaluate[string](
			`document.getElementById("sort_code").getAttribute("aria-describedby")`))
		Expect(err).NotTo(HaveOccurred())
		Expect(described).To(ContainSubstring("sort_code-error"))
		Expect(page()).NotTo(ContainSubstring("12345678"), "the account number is not shown back")
		noSerious("the page with an error")

		By("saving bank details and seeing them masked")
		do(chromedp.Clear(chromedp.CSS("#sort_code")), chromedp.SendKeys(chromedp.CSS("#sort_code"), "12-34-56"),
			chromedp.SendKeys(chromedp.CSS("#account_number"), "12345678"),
			chromedp.Click(chromedp.CSS(`form[action="/hosted/rewards/bank"] button`)),
			chromedp.WaitVisible(chromedp.CSS("#account-number-masked")))
		Expect(text("#account-number-masked")).To(Equal("****5678"))
		Expect(text("#sort-code-masked")).To(Equal("**-**-56"))
		Expect(page()).NotTo(ContainSubstring("12345678"))
		var ciphertext []byte
		Expect(testDB.Pool.QueryRow(ctx, `SELECT ciphertext FROM bank_details WHERE organisation = $1 AND site_id = $2`,
			o.Namespace, siteID).Scan(&ciphertext)).To(Succeed(), "stored, sealed")
		Expect(string(ciphertext)).NotTo(ContainSubstring("12345678"))

		By("requesting the withdrawal and landing on redirect_uri")
		do(chromedp.Click(chromedp.CSS(`form[action="/hosted/rewards/withdraw"] button`)))
		Eventually(func() string {
			loc, _ := browser.Run(b, step, chromedp.Location())
			return loc
		}).Should(Equal(redirect))
		// The withdrawal is in the site's history (PostgreSQL), newest first; the ledger's spec,
		// the platform team's inbox, is not rewritten.
		_, history := call(Default, "GET", "/rewards/"+siteID+"/transactions", tok, nil)
		Expect(history["transactions"]).To(HaveLen(2))
		Expect(history["transactions"].([]any)[0]).To(And(HaveKeyWithValue("transaction_type", "withdrawal"),
			HaveKeyWithValue("credit_pence", BeNumerically("==", -2500)), HaveKeyWithValue("payment_status", "pending_approval")))
		ledger := &flexv1.RewardLedger{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)}, ledger)).To(Succeed())
		Expect(ledger.Spec.Transactions).To(HaveLen(1))

		By("refusing the link a second time")
		do(chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("h1")))
		Expect(text("h1")).To(Equal("Link already used"))

		By("never putting a bearer token in a URL the browser requested")
		for _, r := range b.Requests() {
			Expect(r.URL).NotTo(ContainSubstring("eyJ"), "request %s", r.URL)
		}
	})
})
