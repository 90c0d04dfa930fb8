package server_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/rewards"
	"github.com/flexsite/flexsite/internal/identity"
)

// page is one answer of the hosted rewards page.
type page struct {
	status   int
	header   http.Header
	body     string
	location string
}

// browser is a cookie-keeping client that follows redirects within the REST API only (the
// redirect_uri of a link is another site's).
type browser struct{ c *http.Client }

func newBrowser() *browser {
	jar, err := cookiejar.New(nil)
	Expect(err).NotTo(HaveOccurred())
	api, _ := url.Parse(apiServer.URL)
	return &browser{c: &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host != api.Host {
			return http.ErrUseLastResponse
		}
		return nil
	}}}
}

func (b *browser) do(method, target string, form url.Values, headers ...string) page {
	GinkgoHelper()
	if !strings.HasPrefix(target, "http") {
		target = apiServer.URL + target
	}
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, target, body)
	Expect(err).NotTo(HaveOccurred())
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := b.c.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return page{status: resp.StatusCode, header: resp.Header, body: string(data), location: resp.Header.Get("Location")}
}

var csrfField = regexp.MustCompile(`name="csrf_token" value="([0-9a-f]+)"`)

func (p page) csrf() string {
	GinkgoHelper()
	m := csrfField.FindStringSubmatch(p.body)
	Expect(m).NotTo(BeNil(), "no form token in %s", p.body)
	return m[1]
}

// mailTo returns the messages in the suite's Maildir addressed to one recipient.
func mailTo(recipient string) []string {
	GinkgoHelper()
	files, err := os.ReadDir(filepath.Join(mailDir, "new"))
	Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(mailDir, "new", f.Name()))
		Expect(err).NotTo(HaveOccurred())
		msg, err := mail.ReadMessage(strings.NewReader(string(data)))
		Expect(err).NotTo(HaveOccurred())
		if strings.Contains(msg.Header.Get("To"), recipient) {
			body, _ := io.ReadAll(msg.Body)
			out = append(out, string(body))
		}
	}
	return out
}

// ContainAny matches a string holding any of the characters of chars.
func ContainAny(chars string) OmegaMatcher {
	return WithTransform(func(s string) bool { return strings.ContainsAny(s, chars) }, BeTrue())
}

var sixDigitCode = regexp.MustCompile(`\b([0-9]{6})\b`)

var _ = Describe("The rewards link and the hosted rewards page", func() {
	const redirect = "https://app.example.com/rewards-done?from=flexsite"
	var (
		o        org
		tok      string
		siteID   string
		siteName string
		email    string
	)
	BeforeEach(func(ctx SpecContext) {
		o = newOrg(ctx)
		tok = o.token()
		email = "resident-" + o.Namespace + "@example.com"
		body := household("1200000000011")
		body["site"].(map[string]any)["email"] = email
		siteID = mustCall("POST", "/entities/site/onboard", tok, body)["site"].(map[string]any)["site_id"].(string)
		siteName = identity.SiteNameForMPAN("1200000000011")
	})

	writeLedger := func(ctx SpecContext, pence int64, daysAgo int) {
		GinkgoHelper()
		at := metav1.NewTime(clock.Load().Add(-time.Duration(daysAgo) * 24 * time.Hour).UTC().Truncate(time.Second))
		ledger := &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)},
			Spec: flexv1.RewardLedgerSpec{SiteName: siteName, Transactions: []flexv1.RewardTransaction{
				{ID: identity.NewID(), Type: "flex event", CreditPence: pence, StartTime: &at}}},
		}
		Expect(k8sClient.Create(ctx, ledger)).To(Succeed())
		Eventually(func(g Gomega) any {
			return mustCallG(g, "GET", "/rewards/"+siteID+"/info", tok, nil)["current_balance_pence"]
		}).Should(BeEquivalentTo(pence))
	}
	link := func(query string) map[string]any {
		GinkgoHelper()
		return mustCall("GET", "/rewards/"+siteID+"/url/balance?redirect_uri="+url.QueryEscape(redirect)+query, tok, nil)
	}

	It("moves bank details an older version kept in a Secret into the database, once, and deletes the Secret", func(ctx SpecContext) {
		legacy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: "flexsite-bank-" + siteID},
			Data: map[string][]byte{"account_name": []byte("A Household"), "sort_code": []byte("65-43-21"),
				"account_number": []byte("12345678")}}
		Expect(k8sClient.Create(ctx, legacy)).To(Succeed())
		Eventually(func() string {
			site := &flexv1.Site{}
			_ = serverCache.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: siteName}, site)
			return site.Labels[flexv1.IDLabel]
		}).Should(Equal(siteID))
		Expect(apiSrv.ImportLegacyBankDetails(ctx)).To(BeTrue())
		Expect(bankDetailsRows(ctx, o.Namespace)).To(Equal(1))
		Expect(apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKeyFromObject(legacy), &corev1.Secret{}))).To(BeTrue(),
			"the Secret is deleted once its details are stored")

		b := newBrowser()
		p := b.do("GET", link("&enforce_two_factor_auth=false")["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.body).To(ContainSubstring("****5678"))
		Expect(p.body).NotTo(ContainSubstring("12345678"))
	})

	It("forgets a site's bank details when the site is deleted", func(ctx SpecContext) {
		b := newBrowser()
		p := b.do("GET", link("&enforce_two_factor_auth=false")["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		p = b.do("POST", "/hosted/rewards/bank", url.Values{"csrf_token": {p.csrf()}, "account_name": {"Ada Lovelace"},
			"sort_code": {"65-43-21"}, "account_number": {"12345678"}})
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(bankDetailsRows(ctx, o.Namespace)).To(Equal(1))

		Expect(k8sClient.Delete(ctx, &flexv1.Site{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: siteName}})).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: siteName}, &flexv1.Site{}))
		}).Should(BeTrue())
		Expect(bankDetailsRows(ctx, o.Namespace)).To(BeZero())
	})

	It("validates the link's query and scopes it to the organisation's own sites", func(ctx SpecContext) {
		for _, c := range []struct{ query, param string }{
			{"", "redirect_uri"},
			{"?redirect_uri=" + url.QueryEscape("javascript:alert(1)"), "redirect_uri"},
			{"?redirect_uri=/relative", "redirect_uri"},
			{"?redirect_uri=" + url.QueryEscape("https://user:pw@app.example.com/"), "redirect_uri"},
			{"?redirect_uri=" + url.QueryEscape(redirect) + "&enforce_two_factor_auth=maybe", "enforce_two_factor_auth"},
			{"?redirect_uri=" + url.QueryEscape(redirect) + "&hide_transactions=2", "hide_transactions"},
		} {
			status, resp := call("GET", "/rewards/"+siteID+"/url/balance"+c.query, tok, nil)
			expectValidationItem(status, resp, []any{"query", c.param}, "")
		}
		other := newOrg(ctx).token()
		status, resp := call("GET", "/rewards/"+siteID+"/url/balance?redirect_uri="+url.QueryEscape(redirect), other, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})

	It("takes only an https redirect_uri with a valid host, and writes it encoded into the CSP and Location", func(ctx SpecContext) {
		for _, raw := range []string{
			"https://example.com;script-src/",       // an origin that would add a CSP directive
			"https://example.com,https://evil.test", // two origins
			"http://app.example.com/done",           // plain http beyond loopback
			"https://under_score.example.com/",      // not a host name
			"https://[fe80::1%25eth0]/",             // a zone
			"https://example.com/\u0000",            // a control character
		} {
			status, resp := call("GET", "/rewards/"+siteID+"/url/balance?redirect_uri="+url.QueryEscape(raw), tok, nil)
			expectValidationItem(status, resp, []any{"query", "redirect_uri"}, "")
		}

		hostile := `https://Example.COM/done"><script>alert(1)</script>`
		answer := mustCall("GET", "/rewards/"+siteID+"/url/balance?redirect_uri="+url.QueryEscape(hostile), tok, nil)
		b := newBrowser()
		p := b.do("GET", answer["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.header.Get("Content-Security-Policy")).To(ContainSubstring("form-action 'self' https://example.com;"))
		p = b.do("POST", "/hosted/rewards/finish", url.Values{"csrf_token": {p.csrf()}})
		Expect(p.status).To(Equal(http.StatusSeeOther))
		Expect(p.location).To(Equal("https://example.com/done%22%3E%3Cscript%3Ealert%281%29%3C/script%3E"))
		Expect(p.location).NotTo(ContainAny(`"<> `))
	})

	It("takes a redirect_uri of a private-use scheme (a mobile app's) only when the API client declares it", func(ctx SpecContext) {
		balance := func(raw string) (int, response) {
			return call("GET", "/rewards/"+siteID+"/url/balance?redirect_uri="+url.QueryEscape(raw), tok, nil)
		}
		refusal := func(status int, resp response) string {
			GinkgoHelper()
			expectValidationItem(status, resp, []any{"query", "redirect_uri"}, "")
			return resp.Detail().([]any)[0].(map[string]any)["msg"].(string)
		}
		By("refusing every private-use scheme while the API client declares none")
		Expect(refusal(balance("com.example.app:/callback"))).To(ContainSubstring(`"com.example.app" is not one of the API client's redirectSchemes`))
		By("refusing plain http beyond loopback, and a scheme that is no app's, each saying why")
		Expect(refusal(balance("http://app.example.com/done"))).To(ContainSubstring("must use https"))
		Expect(refusal(balance("myapp:/callback"))).To(ContainSubstring("reverse domain name"))

		patchAPIClient(ctx, o, func(c *flexv1.APIClient) { c.Spec.RedirectSchemes = []string{"com.example.app"} })
		By("taking the declared scheme once the API client declares it, and no other")
		var answer map[string]any
		Eventually(func(g Gomega) {
			status, resp := balance("COM.Example.App:/callback?done=1")
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			answer = resp.MapG(g)
		}).Should(Succeed())
		Expect(refusal(balance("com.example.app.evil:/callback"))).To(ContainSubstring("is not one of the API client's redirectSchemes"))
		Expect(refusal(balance("com.example.app:callback"))).NotTo(BeEmpty(), "an opaque URI is refused")
		Expect(refusal(balance("com.example.app://user:pw@cb/"))).NotTo(BeEmpty(), "credentials are refused")

		By("allowing the page's last form to send the browser on to the app's scheme, and nowhere else")
		b := newBrowser()
		p := b.do("GET", answer["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.header.Get("Content-Security-Policy")).To(ContainSubstring("form-action 'self' com.example.app:;"))
		p = b.do("POST", "/hosted/rewards/finish", url.Values{"csrf_token": {p.csrf()}})
		Expect(p.status).To(Equal(http.StatusSeeOther))
		Expect(p.location).To(Equal("com.example.app:/callback?done=1"))
	})

	It("answers a form larger than its bound with 413, and stores nothing", func(ctx SpecContext) {
		b := newBrowser()
		p := b.do("GET", link("&enforce_two_factor_auth=false")["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		huge := url.Values{"csrf_token": {p.csrf()}, "account_name": {strings.Repeat("A", 20<<20)},
			"sort_code": {"65-43-21"}, "account_number": {"12345678"}}
		p = b.do("POST", "/hosted/rewards/bank", huge)
		Expect(p.status).To(Equal(http.StatusRequestEntityTooLarge), p.body)
		Expect(bankDetailsRows(ctx, o.Namespace)).To(BeZero())
	})

	It("opens once, confirms the emailed code, keeps bank details sealed in PostgreSQL, and records a withdrawal", func(ctx SpecContext) {
		writeLedger(ctx, 2500, 60)
		answer := link("&enforce_two_factor_auth=true")
		expiry, err := time.Parse(time.RFC3339, answer["url_expiry_timestamp"].(string))
		Expect(err).NotTo(HaveOccurred())
		Expect(expiry.Sub(*clock.Load())).To(BeNumerically("~", 15*time.Minute, 2*time.Second))
		linkURL := answer["balance_withdrawal_url"].(string)
		Expect(linkURL).To(HavePrefix(apiServer.URL + "/hosted/rewards/link/"))
		code := strings.TrimPrefix(linkURL, apiServer.URL+"/hosted/rewards/link/")
		Expect(linkURL).NotTo(ContainSubstring("eyJ"), "no bearer token in the link")

		// The link's state is a row of the database that holds hashes only, and no Secret.
		sum := sha256.Sum256([]byte(code))
		var state string
		Expect(testDB.Pool.QueryRow(ctx, `SELECT state::text FROM rewards_links WHERE link_key = $1`,
			fmt.Sprintf("%x", sum)[:40]).Scan(&state)).To(Succeed())
		Expect(state).To(ContainSubstring(fmt.Sprintf("%x", sum)))
		Expect(state).NotTo(ContainSubstring(code))
		secrets := &corev1.SecretList{}
		Expect(k8sClient.List(ctx, secrets, client.InNamespace(keysNamespace))).To(Succeed())
		for _, s := range secrets.Items {
			for _, v := range s.Data {
				Expect(string(v)).NotTo(ContainSubstring(code))
			}
		}

		b := newBrowser()
		p := b.do("GET", linkURL, nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		csp := p.header.Get("Content-Security-Policy")
		Expect(csp).To(ContainSubstring("default-src 'none'"))
		Expect(csp).To(ContainSubstring("frame-ancestors 'none'"))
		Expect(csp).To(ContainSubstring("form-action 'self' https://app.example.com"))
		Expect(csp).NotTo(ContainSubstring("unsafe"))
		Expect(p.header.Get("Cache-Control")).To(Equal("no-store"))
		Expect(p.header.Get("Referrer-Policy")).To(Equal("no-referrer"))
		Expect(p.body).To(ContainSubstring("£25.00"))
		Expect(p.body).To(ContainSubstring("You can withdraw your balance now."))
		Expect(p.body).To(ContainSubstring("Flexibility event reward"))
		Expect(p.body).NotTo(ContainSubstring(`name="account_number"`), "no bank form before the code is confirmed")
		Expect(p.body).NotTo(ContainSubstring("<script"))
		csrf := p.csrf()

		By("refusing the link a second time, in any browser")
		Expect(newBrowser().do("GET", linkURL, nil).status).To(Equal(http.StatusGone))
		Expect(b.do("GET", linkURL, nil).status).To(Equal(http.StatusGone))

		By("refusing bank details before the emailed code is confirmed, and forms without the form token")
		bank := url.Values{"csrf_token": {csrf}, "account_name": {"Ada Lovelace"}, "sort_code": {"65-43-21"}, "account_number": {"12345678"}}
		Expect(b.do("POST", "/hosted/rewards/bank", bank).status).To(Equal(http.StatusForbidden))
		Expect(b.do("POST", "/hosted/rewards/code", url.Values{}).status).To(Equal(http.StatusForbidden))
		Expect(b.do("POST", "/hosted/rewards/code", url.Values{"csrf_token": {strings.Repeat("0", 64)}}).status).To(Equal(http.StatusForbidden))
		Expect(mailTo(email)).To(BeEmpty())

		By("emailing a six-digit code, once per half minute")
		p = b.do("POST", "/hosted/rewards/code", url.Values{"csrf_token": {csrf}})
		Expect(p.status).To(Equal(http.StatusOK), p.body) // after the 303 back to the page
		Expect(p.body).To(ContainSubstring("We sent a code to r****@example.com"))
		mails := mailTo(email)
		Expect(mails).To(HaveLen(1))
		emailed := sixDigitCode.FindStringSubmatch(mails[0])[1]
		Expect(b.do("POST", "/hosted/rewards/code", url.Values{"csrf_token": {csrf}}).status).To(Equal(http.StatusTooManyRequests))
		Expect(mailTo(email)).To(HaveLen(1))

		By("telling a wrong code next to its field")
		wrong := fmt.Sprintf("%06d", (mustAtoi(emailed)+1)%1_000_000)
		p = b.do("POST", "/hosted/rewards/verify", url.Values{"csrf_token": {csrf}, "code": {wrong}})
		Expect(p.status).To(Equal(http.StatusUnprocessableEntity))
		Expect(p.body).To(ContainSubstring(`aria-describedby="code-error"`))
		Expect(p.body).To(MatchRegexp(`<p id="code-error" role="alert"`))

		p = b.do("POST", "/hosted/rewards/verify", url.Values{"csrf_token": {csrf}, "code": {emailed}})
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.body).To(ContainSubstring(`name="account_number"`))

		By("telling each wrong bank field next to it, and never echoing the account number")
		p = b.do("POST", "/hosted/rewards/bank", url.Values{"csrf_token": {csrf}, "account_name": {" "}, "sort_code": {"12-34"},
			"account_number": {"87654321x"}})
		Expect(p.status).To(Equal(http.StatusUnprocessableEntity))
		for _, f := range []string{"account_name", "sort_code", "account_number"} {
			Expect(p.body).To(ContainSubstring(`id="` + f + `-error" role="alert"`))
		}
		Expect(p.body).NotTo(ContainSubstring("87654321"))

		p = b.do("POST", "/hosted/rewards/bank", bank)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.body).To(ContainSubstring("****5678"))
		Expect(p.body).To(ContainSubstring("**-**-21"))
		Expect(p.body).NotTo(ContainSubstring("12345678"))
		Expect(p.body).NotTo(ContainSubstring("65-43-21"))

		// Sealed in the database under a key id, readable by nobody without the key; in no
		// Secret of the organisation and in no CR.
		var keyID string
		var ciphertext []byte
		Expect(testDB.Pool.QueryRow(ctx, `SELECT key_id, ciphertext FROM bank_details WHERE organisation = $1 AND site_id = $2`,
			o.Namespace, siteID).Scan(&keyID, &ciphertext)).To(Succeed())
		Expect(keyID).NotTo(BeEmpty())
		Expect(string(ciphertext)).NotTo(ContainSubstring("12345678"))
		Expect(string(ciphertext)).NotTo(ContainSubstring("65-43-21"))
		orgSecrets := &corev1.SecretList{}
		Expect(k8sClient.List(ctx, orgSecrets, client.InNamespace(o.Namespace))).To(Succeed())
		for _, s := range orgSecrets.Items {
			for _, v := range s.Data {
				Expect(string(v)).NotTo(ContainSubstring("12345678"))
			}
		}
		Expect(snapshot(Default, ctx, o.Namespace)).NotTo(ContainSubstring("12345678"), "bank details in no CR")

		By("recording a withdrawal of the whole balance, then sending the household to redirect_uri")
		p = b.do("POST", "/hosted/rewards/withdraw", url.Values{"csrf_token": {csrf}})
		Expect(p.status).To(Equal(http.StatusSeeOther))
		Expect(p.location).To(Equal(redirect))
		// The withdrawal is in the database (the ledger's spec is the platform team's inbox).
		txs := mustCall("GET", "/rewards/"+siteID+"/transactions", tok, nil)["transactions"].([]any)
		Expect(txs).To(HaveLen(2))
		w := txs[0].(map[string]any)
		Expect(w).To(HaveKeyWithValue("transaction_type", "withdrawal"))
		Expect(w).To(HaveKeyWithValue("credit_pence", float64(-2500)))
		Expect(w).To(HaveKeyWithValue("payment_status", "pending_approval"))
		ledger := &flexv1.RewardLedger{}
		Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: identity.RewardLedgerName(siteName)}, ledger)).To(Succeed())
		Expect(ledger.Spec.Transactions).To(HaveLen(1), "the controller never rewrites the spec")
		Eventually(func(g Gomega) any { return mustCallG(g, "GET", "/rewards/"+siteID+"/info", tok, nil)["can_withdraw"] }).Should(BeFalse())

		By("ending the session")
		Expect(b.do("GET", "/hosted/rewards", nil).status).To(Equal(http.StatusUnauthorized))
		Expect(b.do("POST", "/hosted/rewards/withdraw", url.Values{"csrf_token": {csrf}}).status).To(Equal(http.StatusUnauthorized))
	})

	It("withdraws only when can_withdraw holds, hides the history when asked, and expires", func(ctx SpecContext) {
		writeLedger(ctx, 2500, 3) // inside the 30-day wait
		b := newBrowser()
		p := b.do("GET", link("&enforce_two_factor_auth=false&hide_transactions=true")["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		Expect(p.body).To(ContainSubstring("You can withdraw in 27 days"))
		Expect(p.body).NotTo(ContainSubstring("Flexibility event reward"), "history hidden")
		csrf := p.csrf()
		p = b.do("POST", "/hosted/rewards/bank", url.Values{"csrf_token": {csrf}, "account_name": {"Ada"}, "sort_code": {"123456"},
			"account_number": {"1234 5678"}})
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		p = b.do("POST", "/hosted/rewards/withdraw", url.Values{"csrf_token": {csrf}})
		Expect(p.status).To(Equal(http.StatusUnprocessableEntity))
		Expect(p.body).To(ContainSubstring(`role="alert"`))
		Expect(mustCall("GET", "/rewards/"+siteID+"/transactions", tok, nil)["transactions"]).To(HaveLen(1), "nothing withdrawn")

		By("leaving with Done")
		p = b.do("POST", "/hosted/rewards/finish", url.Values{"csrf_token": {csrf}})
		Expect(p.status).To(Equal(http.StatusSeeOther))
		Expect(p.location).To(Equal(redirect))

		By("refusing a link past its 15 minutes")
		stale := link("")["balance_withdrawal_url"].(string)
		now := *clock.Load()
		later := now.Add(rewards.LinkTTL + time.Minute)
		clock.Store(&later)
		DeferCleanup(func() { clock.Store(&now) })
		Expect(newBrowser().do("GET", stale, nil).status).To(Equal(http.StatusGone))
	})

	It("answers nobody without a live link or session, whatever bearer token they send", func(ctx SpecContext) {
		user := mustCall("POST", "/auth/component-token", tok, componentForm("rewards-user",
			"gave_boundary_meter_consent_at", "2026-01-15T10:30:00Z"))["access_token"].(string)
		b := newBrowser()
		for _, bearer := range []string{"", tok, user} {
			auth := []string{}
			if bearer != "" {
				auth = []string{"Authorization", "Bearer " + bearer}
			}
			for _, c := range []struct{ method, path string }{
				{"GET", "/hosted/rewards"},
				{"POST", "/hosted/rewards/code"}, {"POST", "/hosted/rewards/verify"}, {"POST", "/hosted/rewards/bank"},
				{"POST", "/hosted/rewards/withdraw"}, {"POST", "/hosted/rewards/finish"},
			} {
				var form url.Values
				if c.method == "POST" {
					form = url.Values{"csrf_token": {"x"}}
				}
				p := b.do(c.method, c.path, form, auth...)
				Expect(p.status).To(Equal(http.StatusUnauthorized), "%s %s", c.method, c.path)
				Expect(p.header.Get("Content-Type")).To(HavePrefix("text/html"))
			}
			for _, code := range []string{"nope", strings.Repeat("A", 26), "../../etc/passwd"} {
				Expect(b.do("GET", "/hosted/rewards/link/"+url.PathEscape(code), nil, auth...).status).To(Equal(http.StatusNotFound))
			}
		}
		// A forged cookie naming a real link but not its session.
		answer := link("")
		code := strings.TrimPrefix(answer["balance_withdrawal_url"].(string), apiServer.URL+"/hosted/rewards/link/")
		Expect(newBrowser().do("GET", answer["balance_withdrawal_url"].(string), nil).status).To(Equal(http.StatusOK))
		forged := newBrowser()
		key := fmt.Sprintf("%x", sha256Sum(code))[:40]
		api, _ := url.Parse(apiServer.URL + "/hosted/rewards")
		forged.c.Jar.SetCookies(api, []*http.Cookie{{Name: "flexsite_rewards", Value: key + ".guessed", Path: "/hosted/rewards"}})
		Expect(forged.do("GET", "/hosted/rewards", nil).status).To(Equal(http.StatusUnauthorized))
		// The stylesheet is public and embedded.
		css := b.do("GET", "/hosted/rewards/style.css", nil)
		Expect(css.status).To(Equal(http.StatusOK))
		Expect(css.header.Get("Content-Type")).To(HavePrefix("text/css"))
	})
})

func mustAtoi(s string) int {
	var n int
	_, err := fmt.Sscanf(s, "%d", &n)
	Expect(err).NotTo(HaveOccurred())
	return n
}

func sha256Sum(s string) [32]byte { return sha256.Sum256([]byte(s)) }

// bankDetailsRows is how many sites of the organisation have bank details stored.
func bankDetailsRows(ctx context.Context, namespace string) int {
	var n int
	Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM bank_details WHERE organisation = $1`, namespace).Scan(&n)).To(Succeed())
	return n
}
