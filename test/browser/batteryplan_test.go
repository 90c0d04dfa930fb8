package browser_test

import (
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/test/browser"
)

var _ = Describe("A battery's plan on the rewards page and in the hosted flow in Chromium", func() {
	It("shows when the battery charges and powers the home as a labelled SVG, its steps as a table, and one sentence, "+
		"on both pages, passing axe-core", func(ctx SpecContext) {
		if testDB == nil {
			Skip("no PostgreSQL: the prices live there")
		}
		o := newOrg(ctx)
		tok := o.token()
		siteID, userTok := o.componentToken(tok, "battery-household", embedder.Origin())
		must := func(method, path string, body map[string]any) map[string]any {
			GinkgoHelper()
			status, answer := call(Default, method, path, tok, body)
			Expect(status).To(Equal(http.StatusOK), "%s %s: %v", method, path, answer)
			return answer
		}
		By("a household with a charger and a 5 kWh, 5 kW battery, actively enrolled in full_asset_schedule_control")
		must("PATCH", "/entities/site/"+siteID, map[string]any{"mpan": "2301234567894", "postcode": "SW1A 1AA",
			"address": "1 Battery Road", "email": "battery-" + o.Namespace + "@example.com"})
		must("POST", "/entities/site/"+siteID+"/meter-consent", map[string]any{"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"})
		must("POST", "/entities/asset", map[string]any{"external_id": "charger-" + o.Namespace, "type": "charger", "site_id": siteID,
			"asset_model": "zappi", "installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}})
		must("POST", "/entities/asset", map[string]any{"external_id": "battery-" + o.Namespace, "type": "battery", "site_id": siteID,
			"properties": map[string]any{"power_kw": 5, "capacity_kwh": 5}})
		must("POST", "/entities/site/"+siteID+"/enrol", map[string]any{"proposition": "full_asset_schedule_control"})
		sites := &flexv1.SiteList{}
		Expect(k8sClient.List(ctx, sites, client.InNamespace(o.Namespace), client.MatchingLabels{flexv1.IDLabel: siteID})).To(Succeed())
		Expect(sites.Items).To(HaveLen(1))
		Eventually(func(g Gomega) flexv1.EnrolmentPhase {
			e := &flexv1.Enrolment{}
			g.Expect(k8sClient.Get(ctx, client.ObjectKey{Namespace: o.Namespace,
				Name: identity.EnrolmentName(sites.Items[0].Name, flexv1.PropositionFullAssetScheduleControl)}, e)).To(Succeed())
			return e.Status.Phase
		}).Should(Equal(flexv1.EnrolmentActive))

		By("tomorrow's prices: 50.00, but 10.00 from 01:00 to 02:00 and 100.00 from 17:00 to 18:00")
		tomorrow := prices.Tomorrow(time.Now())
		periods := tomorrow.Periods()
		ps := make([]prices.Price, 0, len(periods))
		for _, t := range periods {
			c := prices.Centi(5000)
			switch t.In(settlement.London).Hour() {
			case 1:
				c = 1000
			case 17:
				c = 10000
			}
			ps = append(ps, prices.Price{Start: t, Centi: c})
		}
		_, err := (&pricestore.Store{Pool: testDB.Pool}).Put(ctx, o.Namespace, "full_asset_schedule_control", tomorrow, ps,
			"browser-spec", time.Now())
		Expect(err).NotTo(HaveOccurred())
		const sentence = "Your battery will charge 01:00–02:00, when energy is cheapest, and power your home 17:00–18:00, when energy is dearest"

		By("the rewards page: the chart and the sentence are in its HTML, which runs no script")
		status, answer := call(Default, "GET", "/rewards/"+siteID+"/url/balance?redirect_uri="+
			url.QueryEscape(embedder.Origin()+"/rewards-done"), tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%v", answer)
		b := newBrowser()
		Expect(b.Do(step, chromedp.Navigate(answer["balance_withdrawal_url"].(string)),
			chromedp.WaitVisible(chromedp.CSS("svg.battery-chart")))).To(Succeed())
		text := func(sel string) string {
			GinkgoHelper()
			t, err := browser.Run(b, step, chromedp.TextContent(chromedp.CSS(sel)))
			Expect(err).NotTo(HaveOccurred())
			return strings.TrimSpace(t)
		}
		Expect(text(".battery-sentence")).To(Equal(sentence))
		role, err := browser.Run(b, step, chromedp.Evaluate[string](`document.querySelector("svg.battery-chart").getAttribute("role")`))
		Expect(err).NotTo(HaveOccurred())
		Expect(role).To(Equal("img"))
		Expect(text("svg.battery-chart title")).To(HavePrefix("Your battery's plan from"))
		Expect(text("svg.battery-chart desc")).To(And(ContainSubstring("01:00–02:00: Charge"), ContainSubstring("17:00–18:00: Power your home")))
		Expect(text(".battery-plan tbody")).To(And(ContainSubstring("01:00–02:00"), ContainSubstring("Power your home")))
		vs, err := b.Axe(step)
		Expect(err).NotTo(HaveOccurred())
		Expect(browser.Serious(vs)).To(BeEmpty(), "axe-core on the battery's plan")
		if dir := screenshotDir(); dir != "" {
			Expect(b.Do(step, chromedp.ScrollIntoView(chromedp.CSS(".battery-plan")))).To(Succeed())
			Expect(b.Viewport(step, 1024, 900, false)).To(Succeed())
			Expect(b.Screenshot(step, filepath.Join(dir, "8-rewards-battery-plan-desktop.png"))).To(Succeed())
		}

		By("the hosted flow: a returning household enrolled starts at its rewards, with the same plan")
		f := embed(newBrowser(), userTok, "")
		f.atStep("rewards")
		Eventually(func(g Gomega) string {
			var said string // "" until the list shows it
			f.eval(g, `(document.querySelector("#rewards-battery-list .battery-sentence") || {}).textContent || ""`, &said)
			return said
		}).Should(Equal(sentence))
		var marks []string
		f.eval(Default, `["role", "aria-labelledby"].map((a) => document.querySelector("#rewards-battery-list svg.battery-chart").getAttribute(a))`, &marks)
		Expect(marks).To(Equal([]string{"img", "battery-plan-1-title battery-plan-1-desc"}))
		var rows float64
		f.eval(Default, `document.querySelectorAll("#rewards-battery-list tbody tr").length`, &rows)
		Expect(rows).To(BeNumerically(">=", 5)) // hold, charge, hold, discharge, hold
		f.checkPage("8-rewards-battery-plan")
	})
})
