package browser_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/test/browser"
)

// screenshotDir is where the flow's screenshots go when FLEXSITE_SCREENSHOTS=1 (docs/hosted-flow).
func screenshotDir() string {
	if os.Getenv("FLEXSITE_SCREENSHOTS") == "" {
		return ""
	}
	return filepath.Join(testenv.RepoRoot(), "docs", "hosted-flow")
}

// flow is one embedding page in one browser, with the flow's iframe.
type flow struct {
	b     *browser.Browser
	frame *chromedp.Node
}

// embed opens an embedding page on the embedder's origin that hands the flow token.
func embed(b *browser.Browser, token, query string) *flow {
	page := embedder.Page(browser.EmbedPage{FlowURL: serverURL + "/hosted/flow" + query, Token: token, TargetOrigin: serverURL})
	Expect(b.Do(step, chromedp.Navigate(page))).To(Succeed())
	frame, err := b.Frame(step, "#flexsite")
	Expect(err).NotTo(HaveOccurred())
	return &flow{b: b, frame: frame}
}

func (f *flow) in() chromedp.QueryOption { return chromedp.FromNode(f.frame) }

func (f *flow) do(g Gomega, actions ...chromedp.Action[chromedp.Void]) {
	GinkgoHelper()
	g.Expect(f.b.Do(step, actions...)).To(Succeed())
}

// visible waits until the selector is visible inside the flow.
func (f *flow) visible(sel string) {
	GinkgoHelper()
	f.do(Default, chromedp.WaitVisible(chromedp.CSS(sel), f.in()))
}

// set sets a field's value as a user's choice would (input and change events).
func (f *flow) set(id, value string) {
	GinkgoHelper()
	f.eval(Default, fmt.Sprintf(`(() => { const e = document.getElementById(%q); e.value = %q; `+
		`e.dispatchEvent(new Event("input", {bubbles: true})); e.dispatchEvent(new Event("change", {bubbles: true})); return e.value; })()`,
		id, value), nil)
}

// atStep waits until the flow shows step name, reporting what it shows otherwise.
func (f *flow) atStep(name string) {
	GinkgoHelper()
	Eventually(func(g Gomega) string {
		var shown string
		f.eval(g, `(() => { const s = document.querySelector("section[data-step]:not([hidden])"); `+
			`return s ? s.dataset.step + ": " + s.innerText : "none: " + document.body.innerText; })()`, &shown)
		return shown
	}).Should(HavePrefix(name + ":"))
}

func (f *flow) text(g Gomega, sel string) string {
	GinkgoHelper()
	t, err := browser.Run(f.b, step, chromedp.TextContent(chromedp.CSS(sel), f.in()))
	g.Expect(err).NotTo(HaveOccurred())
	return t
}

// eval runs script in the flow's document (an isolated world: DOM only).
func (f *flow) eval(g Gomega, script string, out any) {
	GinkgoHelper()
	g.Expect(f.b.EvalInFrame(step, f.frame, script, out)).To(Succeed())
}

// events are the flow's events the embedding page received.
func (f *flow) events(g Gomega) []map[string]any {
	GinkgoHelper()
	evs, err := browser.Run(f.b, step, chromedp.Evaluate[[]map[string]any](`window.flexsiteEvents`))
	g.Expect(err).NotTo(HaveOccurred())
	return evs
}

// checkPage runs axe-core on the flow's current step and, when asked, takes its screenshots.
func (f *flow) checkPage(name string) {
	GinkgoHelper()
	violations, err := f.b.AxeFrame(step, f.frame)
	Expect(err).NotTo(HaveOccurred())
	Expect(browser.Serious(violations)).To(BeEmpty(), "axe-core on step %s: %+v", name, violations)
	if dir := screenshotDir(); dir != "" {
		f.screenshots(dir, name)
	}
}

func (f *flow) screenshots(dir, name string) {
	GinkgoHelper()
	// The flow as the household sees it: the tab shows the flow's own page at each width.
	Expect(f.b.Viewport(step, 1280, 900, false)).To(Succeed())
	Expect(f.b.ViewportScreenshot(step, filepath.Join(dir, name+"-desktop.png"))).To(Succeed())
	Expect(f.b.Viewport(step, 390, 844, true)).To(Succeed())
	Expect(f.b.ViewportScreenshot(step, filepath.Join(dir, name+"-phone.png"))).To(Succeed())
	Expect(f.b.Viewport(step, 1280, 900, false)).To(Succeed())
}

var _ = Describe("The hosted flow in a real browser", func() {
	It("takes a household through every step from an embedding page on the allowed origin; the organisation sees it over REST and in the API server", func(ctx SpecContext) {
		o := newOrg(ctx)
		orgToken := o.token()
		siteID, token := o.componentToken(orgToken, "household-1", embedder.Origin())
		var devicesDid string // what the rewards step says the charger did (with PostgreSQL)
		b := newBrowser()
		f := embed(b, token, "")

		By("address: a wrong MPAN is shown next to its field, and nothing is stored")
		f.visible("#postcode")
		f.checkPage("1-address")
		f.do(Default, chromedp.SendKeys(chromedp.CSS("#postcode"), "SW1A 1AA", f.in()),
			chromedp.SendKeys(chromedp.CSS("#street_address"), "10 Downing Street", f.in()),
			chromedp.SendKeys(chromedp.CSS("#mpan"), "1200000000012", f.in()),
			chromedp.Click(chromedp.CSS("#form-address button[type=submit]"), f.in()))
		Eventually(func(g Gomega) string { return f.text(g, "#mpan-error") }).ShouldNot(BeEmpty())
		var described string
		f.eval(Default, `document.getElementById("mpan").getAttribute("aria-invalid") + " " + document.getElementById("mpan").getAttribute("aria-describedby")`, &described)
		Expect(described).To(Equal("true mpan-help mpan-error"))
		status, site := call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(site["mpan"]).To(BeEmpty())
		f.checkPage("1-address-error")

		f.set("mpan", "")
		f.do(Default, chromedp.SendKeys(chromedp.CSS("#mpan"), "1200000000011", f.in()),
			chromedp.Click(chromedp.CSS("#form-address button[type=submit]"), f.in()))

		By("consent")
		f.atStep("consent")
		f.checkPage("2-consent")
		f.do(Default, chromedp.Click(chromedp.CSS("#gave_boundary_meter_consent"), f.in()),
			chromedp.Click(chromedp.CSS("#form-consent button[type=submit]"), f.in()))

		By("assets: a charger of a catalogued model")
		f.atStep("assets")
		f.set("type", "charger")
		f.set("asset_model", "zappi")
		f.set("installation_date", "2025-06-15")
		f.do(Default, chromedp.SendKeys(chromedp.CSS("#power_kw"), "7.4", f.in()),
			chromedp.Click(chromedp.CSS("#form-assets button[type=submit]"), f.in()))
		Eventually(func(g Gomega) string { return f.text(g, "#asset-list") }).Should(ContainSubstring("EV charger, zappi, 7.4 kW"))
		By("assets: and a battery whose model the household does not know")
		f.set("type", "battery")
		f.do(Default, chromedp.SendKeys(chromedp.CSS("#power_kw"), "5", f.in()),
			chromedp.Click(chromedp.CSS("#form-assets button[type=submit]"), f.in()))
		Eventually(func(g Gomega) string { return f.text(g, "#asset-list") }).Should(ContainSubstring("Home battery, 5 kW"))
		f.checkPage("3-assets")
		f.do(Default, chromedp.Click(chromedp.CSS("#form-assets-done button[type=submit]"), f.in()))

		By("(the household has earned rewards: a ledger as the rewards pipeline writes it)")
		owned := &flexv1.SiteList{}
		Expect(k8sClient.List(ctx, owned, client.InNamespace(o.Namespace), client.MatchingLabels{flexv1.IDLabel: siteID})).To(Succeed())
		Expect(owned.Items).To(HaveLen(1))
		now := time.Now().UTC()
		tx := func(typ flexv1.TransactionType, pence int64, daysAgo int) flexv1.RewardTransaction {
			at := now.Add(-time.Duration(daysAgo) * 24 * time.Hour)
			return flexv1.RewardTransaction{ID: identity.NewID(), Type: typ, CreditPence: pence,
				StartTime: &metav1.Time{Time: at}, SettlementDate: at.Format(time.DateOnly)}
		}
		Expect(k8sClient.Create(ctx, &flexv1.RewardLedger{
			ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: identity.RewardLedgerName(owned.Items[0].Name)},
			Spec: flexv1.RewardLedgerSpec{SiteName: owned.Items[0].Name, Transactions: []flexv1.RewardTransaction{
				tx("signup bonus", 800, 40), tx("flex event", 120, 2), tx("flex period", 250, 10)}},
		})).To(Succeed())

		By("eligibility in plain words")
		Eventually(func(g Gomega) string { return f.text(g, "#eligibility-summary") }).Should(ContainSubstring("Your home can join"))
		Expect(f.text(Default, "#eligibility-summary")).To(ContainSubstring("We need to know the model of this device"))
		Expect(f.text(Default, "#eligibility-summary")).NotTo(ContainSubstring("_"), "no issue codes, only words")
		f.checkPage("4-eligibility")
		f.do(Default, chromedp.Click(chromedp.CSS("#form-eligibility button[type=submit]"), f.in()))

		By("enrol")
		f.atStep("enrol")
		f.visible("#proposition-limited_pause")
		f.checkPage("5-enrol")
		f.do(Default, chromedp.Click(chromedp.CSS("#proposition-limited_pause"), f.in()),
			chromedp.Click(chromedp.CSS("#form-enrol button[type=submit]"), f.in()))

		By("(a flex event over the home started an hour ago: the charger's dispatch executed, not settled yet)")
		if testDB != nil {
			assets := &flexv1.AssetList{}
			Expect(k8sClient.List(ctx, assets, client.InNamespace(o.Namespace))).To(Succeed())
			var chargerID string
			for _, a := range assets.Items {
				if a.Spec.Type == flexv1.AssetTypeCharger {
					chargerID = a.Labels[flexv1.IDLabel]
				}
			}
			Expect(chargerID).NotTo(BeEmpty())
			start := now.Truncate(30 * time.Minute).Add(-time.Hour)
			ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: "dispatched"},
				Spec: flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: metav1.NewTime(start),
					EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25",
					SiteNames: []string{owned.Items[0].Name}}}
			Expect(k8sClient.Create(ctx, ev)).To(Succeed())
			dispatches := &dispatchstore.Store{Pool: testDB.Pool}
			_, err := dispatches.Issue(ctx, o.Namespace, serverURL, []dispatchstore.Dispatch{{FlexEvent: ev.Name, SiteID: siteID,
				AssetID: chargerID, MarketID: "limited_pause", LevelKW: 0, From: start, To: start.Add(time.Hour),
				EventTimestamp: start.Add(-time.Hour)}}, nil, start.Add(-time.Hour))
			Expect(err).NotTo(HaveOccurred())
			_, err = dispatches.Record(ctx, o.Namespace, dispatchstore.Report{AssetID: chargerID,
				EventID: dispatch.EventID(o.Namespace, ev.Name, chargerID), Status: dispatch.Executed, At: start, By: o.Username}, now)
			Expect(err).NotTo(HaveOccurred())
			devicesDid = fmt.Sprintf("Your charger was paused from %s to %s", start.In(settlement.London).Format("15:04"),
				start.Add(time.Hour).In(settlement.London).Format("15:04"))
		}

		By("rewards: balance, when it can withdraw, and the history newest first")
		Eventually(func(g Gomega) string {
			f.do(g, chromedp.Click(chromedp.CSS("#form-rewards button[type=submit]"), f.in()))
			return f.text(g, "#rewards-summary")
		}).Should(ContainSubstring("£11.70"))
		if devicesDid != "" {
			By("rewards: what the household's devices did in the flex event, without a chart before it is settled")
			Eventually(func(g Gomega) string {
				f.do(g, chromedp.Click(chromedp.CSS("#form-rewards button[type=submit]"), f.in()))
				var said string // "" until the list shows it (no wait for an element that may not come)
				f.eval(g, `(document.querySelector("#rewards-events-list .flex-devices") || {}).textContent || ""`, &said)
				return said
			}).Should(Equal(devicesDid))
			var charts float64
			f.eval(Default, `document.querySelectorAll("#rewards-events-list svg, #rewards-events-list table, #rewards-events-list .flex-sentence").length`, &charts)
			Expect(charts).To(BeZero())
		}
		var rows []string
		f.eval(Default, `Array.from(document.querySelectorAll("#rewards-history tbody tr")).map((tr) => tr.innerText.replace(/\s+/g, " ").trim())`, &rows)
		Expect(rows).To(HaveLen(3))
		Expect(rows[0]).To(HaveSuffix("Flexibility event reward £1.20"))
		Expect(rows[1]).To(HaveSuffix("Reward for flexibility £2.50"))
		Expect(rows[2]).To(HaveSuffix("Welcome bonus £8.00"))
		Expect(f.text(Default, "#rewards-withdraw")).To(Equal("You can withdraw your balance now."))
		f.checkPage("6-rewards")

		By("the embedding page got ready, every step and completed, from the flow's origin")
		var steps []string
		var completed map[string]any
		for _, ev := range f.events(Default) {
			switch ev["event"] {
			case "step":
				steps = append(steps, ev["step"].(string))
			case "completed":
				completed = ev
			}
		}
		Expect(f.events(Default)[0]["event"]).To(Equal("ready"))
		Expect(steps).To(Equal([]string{"address", "consent", "assets", "eligibility", "enrol", "rewards"}))
		Expect(completed).To(HaveKeyWithValue("site_id", siteID))
		Expect(completed).To(HaveKeyWithValue("enrolled_propositions", []any{"limited_pause"}))

		By("the organisation sees the household over REST")
		status, site = call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(site).To(HaveKeyWithValue("mpan", "1200000000011"))
		Expect(site).To(HaveKeyWithValue("postcode", "SW1A 1AA"))
		Expect(site).To(HaveKeyWithValue("address", "10 Downing Street"))
		Expect(site["gave_boundary_meter_consent_at"]).NotTo(BeNil())
		Expect(site["asset_ids"]).To(HaveLen(2))

		By("and as objects in the API server (what kubectl shows)")
		sites := &flexv1.SiteList{}
		Expect(k8sClient.List(ctx, sites, client.InNamespace(o.Namespace), client.MatchingLabels{flexv1.IDLabel: siteID})).To(Succeed())
		Expect(sites.Items).To(HaveLen(1))
		Expect(sites.Items[0].Spec.MPAN).To(Equal("1200000000011"))
		assets := &flexv1.AssetList{}
		Expect(k8sClient.List(ctx, assets, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(assets.Items).To(HaveLen(2))
		for _, a := range assets.Items {
			Expect(a.Spec.SiteName).To(Equal(sites.Items[0].Name))
			if a.Spec.Type == flexv1.AssetTypeCharger {
				Expect(a.Spec.Model).To(Equal("zappi"))
				Expect(a.Spec.InstallationDate).To(Equal("2025-06-15"))
				Expect(*a.Spec.PowerW).To(Equal(int64(7400)))
			}
		}
		enrolments := &flexv1.EnrolmentList{}
		Expect(k8sClient.List(ctx, enrolments, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(enrolments.Items).To(HaveLen(1))
		Expect(enrolments.Items[0].Spec.Proposition).To(Equal(flexv1.PropositionLimitedPause))

		By("the token never appeared in a URL the browser requested, nor in a Referer")
		requests := b.Requests()
		Expect(requests).NotTo(BeEmpty())
		sawAPI := false
		for _, r := range requests {
			Expect(r.URL).NotTo(ContainSubstring(token), "%s %s", r.Method, r.URL)
			for k, v := range r.Headers {
				if strings.EqualFold(k, "referer") {
					Expect(v).NotTo(ContainSubstring(token))
				}
			}
			if strings.HasPrefix(r.URL, serverURL+"/hosted/api/") {
				sawAPI = true
				Expect(r.Headers).To(HaveKeyWithValue("Authorization", "Bearer "+token), "%s %s", r.Method, r.URL)
			}
		}
		Expect(sawAPI).To(BeTrue(), "the network log has the flow's API calls")
		for _, uri := range serverSeen.URIs() {
			Expect(uri).NotTo(ContainSubstring(token))
		}

		By("a returning household starts where it is, its values filled in")
		_, again := o.componentToken(orgToken, "household-1", embedder.Origin())
		g := embed(b, again, "")
		g.visible("#rewards-summary")
		var values string
		g.eval(Default, `[document.getElementById("postcode").value, document.getElementById("mpan").value, document.getElementById("gave_boundary_meter_consent").checked].join("|")`, &values)
		// The MPAN is shown masked, never in a field (Find my meter: the page never holds one in full).
		Expect(values).To(Equal("SW1A 1AA||true"))
		Expect(g.text(Default, "#meter-current")).To(ContainSubstring("•••••••••0011"))

		By("and can leave a programme again, which records the withdrawal")
		g.do(Default, chromedp.Click(chromedp.CSS("#form-rewards button.back"), g.in()))
		g.atStep("enrol")
		var ticked bool
		g.eval(Default, `document.getElementById("proposition-limited_pause").checked`, &ticked)
		Expect(ticked).To(BeTrue(), "the stored enrolment shows as chosen")
		g.do(Default, chromedp.Click(chromedp.CSS("#proposition-limited_pause"), g.in()),
			chromedp.Click(chromedp.CSS("#form-enrol button[type=submit]"), g.in()))
		g.atStep("rewards")
		Eventually(func(g Gomega) {
			list := &flexv1.EnrolmentList{}
			g.Expect(k8sClient.List(ctx, list, client.InNamespace(o.Namespace))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
			site := &flexv1.Site{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKeyFromObject(&sites.Items[0]), site)).To(Succeed())
			g.Expect(site.Status.EnrolmentHistory).NotTo(BeEmpty())
		}).Should(Succeed())

		By("and rejoin it by its own choice")
		g.do(Default, chromedp.Click(chromedp.CSS("#form-rewards button.back"), g.in()))
		g.atStep("enrol")
		g.do(Default, chromedp.Click(chromedp.CSS("#proposition-limited_pause"), g.in()),
			chromedp.Click(chromedp.CSS("#form-enrol button[type=submit]"), g.in()))
		g.atStep("rewards")
		list := &flexv1.EnrolmentList{}
		Expect(k8sClient.List(ctx, list, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(list.Items).To(HaveLen(1))
		Expect(list.Items[0].Spec.OverrideWithdrawal).To(BeTrue())
	})

	It("refuses a token posted from another origin than its allowed origin, and writes nothing", func(ctx SpecContext) {
		o := newOrg(ctx)
		orgToken := o.token()
		// The token names another origin than the page that posts it.
		siteID, token := o.componentToken(orgToken, "household-2", "https://app.example.com")
		status, before := call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(status).To(Equal(http.StatusOK))
		b := newBrowser()
		f := embed(b, token, "")
		f.visible("#fatal")
		Expect(f.text(Default, "#fatal")).To(ContainSubstring("can only be used from the app"))
		var hidden bool
		f.eval(Default, `document.getElementById("step-address").hidden && document.getElementById("waiting").hidden`, &hidden)
		Expect(hidden).To(BeTrue())
		for _, ev := range f.events(Default) {
			Expect(ev["event"]).To(Equal("ready"), "no event but ready reaches another origin")
		}
		_, after := call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(after).To(Equal(before))
		assets := &flexv1.AssetList{}
		Expect(k8sClient.List(ctx, assets, client.InNamespace(o.Namespace))).To(Succeed())
		Expect(assets.Items).To(BeEmpty())

		By("the server refuses the same token with the page's origin, and any call without the header")
		for _, origin := range []string{embedder.Origin(), ""} {
			status, data, err := testenv.CallWithHeaders(serverURL, "PUT", "/hosted/api/address", token,
				map[string]any{"postcode": "SW1A 1AA", "mpan": "1200000000011"}, map[string]string{"Flexsite-Embedder-Origin": origin})
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusForbidden), "%s", data)
		}
		_, after = call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(after).To(Equal(before))
	})

	It("tells the embedding page of an error, and only it, when the token stops working", func(ctx SpecContext) {
		o := newOrg(ctx)
		orgToken := o.token()
		siteID, token := o.componentToken(orgToken, "household-4", embedder.Origin())
		b := newBrowser()
		f := embed(b, token, "")
		f.atStep("address")
		By("the organisation disables its API client: its end users' tokens stop at once")
		clients := &flexv1.APIClientList{}
		Expect(k8sClient.List(ctx, clients, client.InNamespace(o.Namespace))).To(Succeed())
		for i := range clients.Items {
			c := clients.Items[i].DeepCopy()
			c.Spec.Disabled = true
			Expect(k8sClient.Update(ctx, c)).To(Succeed())
		}
		Eventually(func(g Gomega) int {
			status, _ := call(g, "GET", "/entities/site/"+siteID, token, nil)
			return status
		}).Should(Equal(http.StatusUnauthorized))
		f.do(Default, chromedp.SendKeys(chromedp.CSS("#postcode"), "SW1A 1AA", f.in()),
			chromedp.SendKeys(chromedp.CSS("#mpan"), "1200000000011", f.in()),
			chromedp.Click(chromedp.CSS("#form-address button[type=submit]"), f.in()))
		Eventually(func(g Gomega) string { return f.text(g, "#form-address .form-error") }).ShouldNot(BeEmpty())
		Eventually(func(g Gomega) []string {
			events := f.events(g)
			names := make([]string, 0, len(events))
			for _, ev := range events {
				names = append(names, fmt.Sprint(ev["event"]))
				if ev["event"] == "error" {
					g.Expect(ev["message"]).NotTo(BeEmpty())
				}
			}
			return names
		}).Should(Equal([]string{"ready", "step", "error"}))
	})

	It("completes a step with the keyboard alone", func(ctx SpecContext) {
		o := newOrg(ctx)
		orgToken := o.token()
		siteID, token := o.componentToken(orgToken, "household-3", embedder.Origin())
		b := newBrowser()
		f := embed(b, token, "?primary=%23005a30&background=%23fffff0")
		f.visible("#postcode")
		// Tab from the embedding page into the flow, until the postcode field has the focus.
		var active string
		for range 20 { // past Find my meter's fields
			f.do(Default, chromedp.KeyEvent("\t"))
			f.eval(Default, `document.hasFocus() ? (document.activeElement.id || document.activeElement.tagName) : ""`, &active)
			if active == "postcode" {
				break
			}
		}
		Expect(active).To(Equal("postcode"))
		f.do(Default, chromedp.KeyEvent("SW1A 1AA"), chromedp.KeyEvent("\t"), chromedp.KeyEvent("1 Keyboard Lane"),
			chromedp.KeyEvent("\t"), chromedp.KeyEvent("1200000000011"), chromedp.KeyEvent("\r"))
		f.visible("#gave_boundary_meter_consent")
		f.eval(Default, `document.activeElement.id`, &active)
		Expect(active).To(Equal("consent-title"), "the next step's heading has the focus")
		// Tab to the checkbox, tick it with the space bar, and submit with Enter on the button.
		for range 5 {
			f.do(Default, chromedp.KeyEvent("\t"))
			f.eval(Default, `document.activeElement.id || document.activeElement.textContent`, &active)
			if active == "gave_boundary_meter_consent" {
				break
			}
		}
		Expect(active).To(Equal("gave_boundary_meter_consent"))
		f.do(Default, chromedp.KeyEvent(" "), chromedp.KeyEvent("\t"), chromedp.KeyEvent("\t"), chromedp.KeyEvent("\r"))
		f.visible("#form-assets")
		_, site := call(Default, "GET", "/entities/site/"+siteID, orgToken, nil)
		Expect(site).To(HaveKeyWithValue("mpan", "1200000000011"))
		Expect(site).To(HaveKeyWithValue("address", "1 Keyboard Lane"))
		Expect(site["gave_boundary_meter_consent_at"]).NotTo(BeNil())
		violations, err := b.AxeFrame(step, f.frame)
		Expect(err).NotTo(HaveOccurred())
		Expect(browser.Serious(violations)).To(BeEmpty(), fmt.Sprintf("%+v", violations))
	})
})
