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

	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/testenv"
	"github.com/flexsite/flexsite/test/browser"
)

var _ = Describe("A settled flex event on the rewards page in Chromium", func() {
	It("shows the usual against the actual per half-hour as a labelled SVG, its figures as a table, "+
		"and one sentence, without script", func(ctx SpecContext) {
		if testDB == nil {
			Skip("no PostgreSQL: the settlements live there")
		}
		o := newOrg(ctx)
		tok := o.token()
		status, onboarded := call(Default, "POST", "/entities/site/onboard", tok, map[string]any{
			"site": map[string]any{"mpan": "2301234567894", "postcode": "SW1A 1AA", "email": "flex-" + o.Namespace + "@example.com",
				"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
			"assets": []any{map[string]any{"external_id": "charger-" + o.Namespace, "type": "charger", "asset_model": "zappi",
				"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
			"proposition": "limited_pause",
		})
		Expect(status).To(Equal(http.StatusOK), "%v", onboarded)
		siteID := onboarded["site"].(map[string]any)["site_id"].(string)
		chargerID := onboarded["assets"].([]any)[0].(map[string]any)["asset_id"].(string)

		By("the site's readings (the spec's first worked example) and a flex event over them, settled")
		start := testenv.SettledWorkingDay(time.Now())
		write := func(at time.Time, kwh float64) {
			GinkgoHelper()
			_, err := testDB.Pool.Exec(ctx, `INSERT INTO readings (organisation, site_id, asset_id, label, start_at, end_at, value)
				VALUES ($1, $2, 'meter', 'boundary_import_kw', $3, $4, $5)`, o.Namespace, siteID, at, at.Add(30*time.Minute), kwh*2)
			Expect(err).NotTo(HaveOccurred())
		}
		for back, n := 1, 0; n < 12; back++ {
			d := time.Date(start.Year(), start.Month(), start.Day()-back, 17, 30, 0, 0, settlement.London)
			if d.Weekday() != time.Saturday && d.Weekday() != time.Sunday {
				write(d, 1.8)
				write(d.Add(30*time.Minute), 2.6)
				n++
			}
		}
		write(start, 0.4)
		write(start.Add(30*time.Minute), 2.9)
		status, created := call(Default, "POST", "/flex-events", tok, map[string]any{"proposition": "limited_pause",
			"start_at": start.Format(time.RFC3339), "end_at": start.Add(time.Hour).Format(time.RFC3339),
			"direction": "turn_down", "rate_pence_per_kwh": 25, "site_ids": []any{siteID}})
		Expect(status).To(Equal(http.StatusCreated), "%v", created)
		By("the charger's dispatch reported executed, another asset's only accepted (as their controllers would)")
		eventName := created["id"].(string)
		dispatches := &dispatchstore.Store{Pool: testDB.Pool}
		_, err := dispatches.Issue(ctx, o.Namespace, serverURL, []dispatchstore.Dispatch{
			{FlexEvent: eventName, SiteID: siteID, AssetID: chargerID, MarketID: "limited_pause", LevelKW: 0,
				From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)},
			{FlexEvent: eventName, SiteID: siteID, AssetID: "another-asset", MarketID: "limited_pause", LevelKW: 0,
				From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)},
		}, nil, start.Add(-time.Hour))
		Expect(err).NotTo(HaveOccurred())
		for _, r := range []struct {
			asset  string
			status dispatch.Status
		}{{chargerID, dispatch.Accepted}, {chargerID, dispatch.Executed}, {"another-asset", dispatch.Accepted}} {
			_, err := dispatches.Record(ctx, o.Namespace, dispatchstore.Report{AssetID: r.asset,
				EventID: dispatch.EventID(o.Namespace, eventName, r.asset), Status: r.status, At: start, By: o.Username}, time.Now())
			Expect(err).NotTo(HaveOccurred())
		}
		Eventually(func(g Gomega) any {
			_, ev := call(g, "GET", "/flex-events/"+created["id"].(string), tok, nil)
			return ev["status"]
		}).Should(Equal("settled"))
		By("the credit in the site's reward history, as any other credit (the ledger's store built it)")
		Eventually(func(g Gomega) any {
			_, history := call(g, "GET", "/rewards/"+siteID+"/transactions", tok, nil)
			return history["transactions"]
		}).Should(ConsistOf(HaveKeyWithValue("credit_pence", BeNumerically("==", 35))))

		status, answer := call(Default, "GET", "/rewards/"+siteID+"/url/balance?redirect_uri="+
			url.QueryEscape(embedder.Origin()+"/rewards-done"), tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%v", answer)

		By("opening the page: the chart and the sentence are in its HTML, which runs no script " +
			"(its Content-Security-Policy, default-src 'none', allows none)")
		b := newBrowser()
		Expect(b.Do(step, chromedp.Navigate(answer["balance_withdrawal_url"].(string)),
			chromedp.WaitVisible(chromedp.CSS("svg.flex-chart")))).To(Succeed())
		scripts, err := browser.Run(b, step, chromedp.Evaluate[float64](`document.scripts.length`))
		Expect(err).NotTo(HaveOccurred())
		Expect(scripts).To(BeZero())
		text := func(sel string) string {
			GinkgoHelper()
			t, err := browser.Run(b, step, chromedp.TextContent(chromedp.CSS(sel)))
			Expect(err).NotTo(HaveOccurred())
			return strings.TrimSpace(t)
		}
		Expect(text(".flex-sentence")).To(Equal("You used 1.1 kWh less than usual between 17:30 and 18:30: £0.35"))
		Expect(text(".flex-event h3")).To(Equal(start.Format("Monday 2 January 2006")))
		// What the devices did: the executed dispatch only (the accepted one says nothing).
		Expect(text(".flex-event .flex-devices")).To(Equal("Your charger was paused from 17:30 to 18:30"))
		role, err := browser.Run(b, step, chromedp.Evaluate[string](`document.querySelector("svg.flex-chart").getAttribute("role")`))
		Expect(err).NotTo(HaveOccurred())
		Expect(role).To(Equal("img"))
		Expect(text("svg.flex-chart title")).To(HavePrefix("Your electricity use during the event on"))
		Expect(text("svg.flex-chart desc")).To(Equal("17:30: usual 1.80 kWh, actual 0.40 kWh; 18:00: usual 2.60 kWh, actual 2.90 kWh."))
		bars, err := browser.Run(b, step, chromedp.Evaluate[float64](`document.querySelectorAll("svg.flex-chart rect.usual, svg.flex-chart rect.actual").length`))
		Expect(err).NotTo(HaveOccurred())
		Expect(bars).To(Equal(4.0))
		Expect(text(".flex-event tbody")).To(And(ContainSubstring("17:30"), ContainSubstring("1.80 kWh"), ContainSubstring("2.90 kWh")))
		// The SVG's accessible name is its title (aria-labelledby), as a screen reader reads it.
		name, err := browser.Run(b, step, chromedp.Evaluate[string](
			`(() => { const s = document.querySelector("svg.flex-chart"); return s.getAttribute("aria-labelledby").split(" ").map(id => document.getElementById(id).textContent).join(" | "); })()`))
		Expect(err).NotTo(HaveOccurred())
		Expect(name).To(ContainSubstring("usual 1.80 kWh"))

		vs, err := b.Axe(step)
		Expect(err).NotTo(HaveOccurred())
		Expect(browser.Serious(vs)).To(BeEmpty(), "axe-core on the flex event chart")
		if dir := screenshotDir(); dir != "" {
			Expect(b.Do(step, chromedp.ScrollIntoView(chromedp.CSS(".flex-event")))).To(Succeed())
			Expect(b.Viewport(step, 1024, 900, false)).To(Succeed())
			Expect(b.Screenshot(step, filepath.Join(dir, "7-rewards-flex-event-desktop.png"))).To(Succeed())
			Expect(b.Viewport(step, 390, 844, true)).To(Succeed())
			Expect(b.Screenshot(step, filepath.Join(dir, "7-rewards-flex-event-phone.png"))).To(Succeed())
		}
	})
})
