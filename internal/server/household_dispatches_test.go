package server_test

import (
	"net/http"
	"net/url"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/hostedflow"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/testenv"
)

var _ = Describe("What the household's devices did in a flex event", func() {
	It("is said on the rewards page and in the hosted flow in the same words, for executed dispatches only", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		userTok, siteID, siteName := endUserSite(ctx, o, tok, "dispatch-user")
		asset := func(body map[string]any) string {
			GinkgoHelper()
			body["site_id"] = siteID
			return mustCall("POST", "/entities/asset", tok, body)["id"].(string)
		}
		charger := asset(map[string]any{"external_id": "charger-d", "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}})
		battery := asset(map[string]any{"external_id": "battery-d", "type": "battery",
			"properties": map[string]any{"power_kw": 5, "capacity_kwh": 13.5}})
		heatPump := asset(map[string]any{"external_id": "heat-pump-d", "type": "heat pump"})

		By("a flex event over the site that started an hour ago (not settled yet), its dispatches issued " +
			"and reported as the asset controllers would")
		start := time.Now().UTC().Truncate(30 * time.Minute).Add(-time.Hour)
		ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: "dispatched-" + o.Namespace},
			Spec: flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: metav1.NewTime(start),
				EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25",
				SiteNames: []string{siteName}}}
		Expect(k8sClient.Create(ctx, ev)).To(Succeed())
		store := &dispatchstore.Store{Pool: testDB.Pool}
		issue := func(assetID string, levelKW float64) dispatchstore.Dispatch {
			return dispatchstore.Dispatch{FlexEvent: ev.Name, SiteID: siteID, AssetID: assetID, MarketID: "limited_pause",
				LevelKW: levelKW, From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)}
		}
		// "gone" is an asset deleted since: Flexsite no longer knows its type.
		_, err := store.Issue(ctx, o.Namespace, apiServer.URL, []dispatchstore.Dispatch{issue(charger, 0), issue(battery, 5),
			issue(heatPump, 0), issue("gone", 0)}, nil, start.Add(-time.Hour))
		Expect(err).NotTo(HaveOccurred())
		report := func(assetID string, statuses ...dispatch.Status) {
			GinkgoHelper()
			for _, st := range statuses {
				_, err := store.Record(ctx, o.Namespace, dispatchstore.Report{AssetID: assetID,
					EventID: dispatch.EventID(o.Namespace, ev.Name, assetID), Status: st, At: start, By: o.Username}, time.Now())
				Expect(err).NotTo(HaveOccurred())
			}
		}
		report(charger, dispatch.Accepted, dispatch.Executed)
		report(battery, dispatch.Executed)
		report(heatPump, dispatch.Accepted) // accepted, never executed: nothing to say
		report("gone", dispatch.Executed)

		from, to := start.In(settlement.London).Format("15:04"), start.Add(time.Hour).In(settlement.London).Format("15:04")
		want := []string{
			"Your charger was paused from " + from + " to " + to,
			"Your battery was discharged from " + from + " to " + to,
			"Your device was paused from " + from + " to " + to,
		}

		By("the hosted flow's rewards step")
		Eventually(func(g Gomega) {
			status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/rewards", userTok, nil,
				map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), "%s", data)
			events, _ := response(data).MapG(g)["flex_events"].([]any)
			g.Expect(events).To(HaveLen(1))
			g.Expect(events[0]).To(And(HaveKeyWithValue("sentence", ""), HaveKeyWithValue("chart_svg", ""),
				HaveKeyWithValue("day", start.In(settlement.London).Format("Monday 2 January 2006"))))
			g.Expect(events[0].(map[string]any)["devices"]).To(ConsistOf(want[0], want[1], want[2]))
		}).Should(Succeed())

		By("the rewards page")
		answer := mustCall("GET", "/rewards/"+siteID+"/url/balance?enforce_two_factor_auth=false&redirect_uri="+
			url.QueryEscape("https://app.example.com/done"), tok, nil)
		p := newBrowser().do("GET", answer["balance_withdrawal_url"].(string), nil)
		Expect(p.status).To(Equal(http.StatusOK), p.body)
		for _, w := range want {
			Expect(p.body).To(ContainSubstring("<li>"+w+"</li>"), "the rewards page says %q", w)
		}
		Expect(strings.Count(p.body, "<li>Your ")).To(Equal(3))
		Expect(p.body).NotTo(ContainSubstring("heat pump"), "the heat pump only accepted")

		By("the REST API's site flex events answering no sentence (prod's shape)")
		status, data := call("GET", "/entities/site/"+siteID+"/flex-events", tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", data)
		Expect(string(data)).NotTo(ContainSubstring("Your charger"))
	})

	It("says what a device is doing while the window lasts, not what it did", func(ctx SpecContext) {
		o := newOrg(ctx)
		tok := o.token()
		userTok, siteID, siteName := endUserSite(ctx, o, tok, "ongoing-user")
		charger := mustCall("POST", "/entities/asset", tok, map[string]any{"site_id": siteID, "external_id": "charger-o",
			"type": "charger", "asset_model": "zappi", "installation_date": "2025-06-15",
			"properties": map[string]any{"power_kw": 7.4}})["id"].(string)
		// The REST API's clock (the suite's, which tests move) set to the machine's for this
		// spec: the window and the report are judged by it, the flex event by the controllers'.
		was, now := *clock.Load(), time.Now()
		clock.Store(&now)
		DeferCleanup(func() { clock.Store(&was) })
		// A window that started at the last half-hour and lasts an hour: under way now.
		start := now.UTC().Truncate(30 * time.Minute)
		ev := &flexv1.FlexEvent{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: "ongoing-" + o.Namespace},
			Spec: flexv1.FlexEventSpec{Proposition: flexv1.PropositionLimitedPause, StartAt: metav1.NewTime(start),
				EndAt: metav1.NewTime(start.Add(time.Hour)), Direction: flexv1.FlexTurnDown, RatePencePerKWh: "25",
				SiteNames: []string{siteName}}}
		Expect(k8sClient.Create(ctx, ev)).To(Succeed())
		store := &dispatchstore.Store{Pool: testDB.Pool}
		_, err := store.Issue(ctx, o.Namespace, apiServer.URL, []dispatchstore.Dispatch{{FlexEvent: ev.Name, SiteID: siteID,
			AssetID: charger, MarketID: "limited_pause", From: start, To: start.Add(time.Hour),
			EventTimestamp: start.Add(-time.Hour)}}, nil, start.Add(-time.Hour))
		Expect(err).NotTo(HaveOccurred())
		status, resp := call("POST", "/entities/asset/"+charger+"/callback/"+dispatch.EventID(o.Namespace, ev.Name, charger).String(),
			tok, map[string]any{"timestamp": now.UTC().Format(time.RFC3339), "status": "EXECUTED"})
		Expect(status).To(Equal(http.StatusOK), "%s", resp)

		until := start.Add(time.Hour).In(settlement.London).Format("15:04")
		Eventually(func(g Gomega) {
			status, data, err := testenv.CallWithHeaders(apiServer.URL, "GET", "/hosted/api/rewards", userTok, nil,
				map[string]string{hostedflow.EmbedderOriginHeader: "https://app.example.com"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(status).To(Equal(http.StatusOK), "%s", data)
			events, _ := response(data).MapG(g)["flex_events"].([]any)
			g.Expect(events).To(HaveLen(1))
			g.Expect(events[0].(map[string]any)["devices"]).To(ConsistOf("Your charger is paused until " + until))
		}).Should(Succeed())
	})
})
