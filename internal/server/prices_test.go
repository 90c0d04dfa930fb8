package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/db"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
)

// Specs of market prices and price curves (docs/api.md, "Prices") against the real API server and a
// real PostgreSQL: a UK day declared whole (46, 48 or 50 periods, two decimals), read back and
// replaced; every bad declaration a 422 that stores nothing; the role prices_write; another
// organisation's day not found; the curve of a site (and of its asset) actively enrolled in
// price_curve from the current period, listing the periods whose price is declared, to 23:00 today
// or tomorrow; and the database down a 503 with Retry-After.

// pricesMPAN makes the i-th MPAN of these specs' series.
func pricesMPAN(i int) string { return validMPAN(36000 + i) }

// dayPrices is a declaration of n prices for the UK day named date: its periods' starts in
// order (past its end, on the following half-hours), the i-th priced by price(i) (a JSON
// number's literal).
func dayPrices(g Gomega, date string, n int, price func(i int) string) map[string]any {
	GinkgoHelper()
	day, err := prices.ParseDay(date)
	g.Expect(err).NotTo(HaveOccurred())
	periods := day.Periods()
	items := make([]any, n)
	for i := range n {
		start := periods[0].Add(time.Duration(i) * prices.HalfHour)
		if i < len(periods) {
			start = periods[i]
		}
		items[i] = map[string]any{"start_timestamp": start.Format(time.RFC3339), "price_gbp_per_mwh": json.Number(price(i))}
	}
	return map[string]any{"half_hourly_prices": items}
}

// pence is a price of i pounds and i pence per MWh: 0.00, 1.01, 2.02, ...
func pence(i int) string { return fmt.Sprintf("%d.%02d", i, i%100) }

// marketPricesRows counts an organisation's stored prices.
func marketPricesRows(ctx context.Context, ns string) int {
	var n int
	Expect(database.Pool.QueryRow(ctx, `SELECT count(*) FROM market_prices WHERE organisation = $1`, ns).Scan(&n)).To(Succeed())
	return n
}

// curvePrices is a price curve answer as (start, price) pairs. Every listed period has a
// price: production declares it a required number, never null.
func curvePrices(g Gomega, answer map[string]any) [][2]string {
	GinkgoHelper()
	g.Expect(answer).To(HaveLen(1), "prod's PriceCurveResponse has one member")
	items := answer["half_hourly_traded_prices"].([]any)
	out := make([][2]string, len(items))
	for i, item := range items {
		m := item.(map[string]any)
		g.Expect(m).To(HaveLen(2))
		g.Expect(m["price_gbp_per_mwh"]).To(BeAssignableToTypeOf(0.0), "a listed period has a price, never null")
		out[i] = [2]string{m["start_timestamp"].(string), fmt.Sprint(m["price_gbp_per_mwh"])}
	}
	return out
}

// wantCurve is the horizon of the half-hours from `from` for n periods, priced by price (the
// period's start: "null" when none is declared, else the price as Go prints a JSON number).
func wantCurve(from time.Time, n int, price func(t time.Time) string) [][2]string {
	out := make([][2]string, n)
	for i := range out {
		t := from.Add(time.Duration(i) * prices.HalfHour).UTC()
		out[i] = [2]string{t.Format(time.RFC3339), price(t)}
	}
	return out
}

// listed is what a curve answers of a horizon: its periods with a declared price.
func listed(horizon [][2]string) [][2]string {
	out := [][2]string{}
	for _, p := range horizon {
		if p[1] != "null" {
			out = append(out, p)
		}
	}
	return out
}

var _ = Describe("Market prices", func() {
	var (
		o   org
		tok string
	)
	const path = "/market-prices/price_curve/"
	BeforeEach(func(ctx SpecContext) {
		needDatabase()
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RolePricesWrite)
		tok = o.token()
	})

	It("declares a day whole (201), reads it back, and replaces it whole (200)", func(ctx SpecContext) {
		status, resp := call("PUT", path+"2027-01-12", tok, dayPrices(Default, "2027-01-12", 48, pence))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		created := resp.Map()
		Expect(created).To(HaveKeyWithValue("market", "price_curve"))
		Expect(created).To(HaveKeyWithValue("date", "2027-01-12"))
		Expect(created).To(HaveKeyWithValue("updated_by", o.Username))
		items := created["half_hourly_prices"].([]any)
		Expect(items).To(HaveLen(48))
		Expect(items[0]).To(Equal(map[string]any{"start_timestamp": "2027-01-12T00:00:00Z", "price_gbp_per_mwh": 0.0}))
		Expect(items[45]).To(Equal(map[string]any{"start_timestamp": "2027-01-12T22:30:00Z", "price_gbp_per_mwh": 45.45}))

		got := mustCall("GET", path+"2027-01-12", tok, nil)
		Expect(got).To(Equal(created), "GET answers what PUT stored")
		Expect(marketPricesRows(ctx, o.Namespace)).To(Equal(48))

		By("declaring the day again, in another order, with negative prices and one decimal")
		again := dayPrices(Default, "2027-01-12", 48, func(i int) string { return fmt.Sprintf("-%d.5", i) })
		list := again["half_hourly_prices"].([]any)
		list[0], list[47] = list[47], list[0]
		status, resp = call("PUT", path+"2027-01-12", tok, again)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		got = mustCall("GET", path+"2027-01-12", tok, nil)
		Expect(got).To(Equal(resp.Map()))
		items = got["half_hourly_prices"].([]any)
		Expect(items[0]).To(Equal(map[string]any{"start_timestamp": "2027-01-12T00:00:00Z", "price_gbp_per_mwh": -0.5}))
		Expect(items[47]).To(Equal(map[string]any{"start_timestamp": "2027-01-12T23:30:00Z", "price_gbp_per_mwh": -47.5}))
		Expect(marketPricesRows(ctx, o.Namespace)).To(Equal(48))

		By("a start written in another zone is the same period")
		body := dayPrices(Default, "2027-01-13", 48, pence)
		first := body["half_hourly_prices"].([]any)[0].(map[string]any)
		first["start_timestamp"] = "2027-01-13T01:00:00+01:00"
		status, resp = call("PUT", path+"2027-01-13", tok, body)
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
	})

	It("takes the clock-change days' 46 and 50 periods, and refuses 48 on them", func(ctx SpecContext) {
		status, resp := call("PUT", path+"2027-03-28", tok, dayPrices(Default, "2027-03-28", 48, pence))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.Detail()).To(ContainElement(SatisfyAll(HaveKeyWithValue("loc", []any{"body", "half_hourly_prices"}),
			HaveKeyWithValue("type", "settlement_periods"))))
		status, resp = call("PUT", path+"2027-03-28", tok, dayPrices(Default, "2027-03-28", 46, pence))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		items := resp.Map()["half_hourly_prices"].([]any)
		Expect(items).To(HaveLen(46))
		// 01:00 local is 01:00 UTC (GMT) and the next period is 02:00 local, 01:00 UTC (BST)...
		Expect(items[1].(map[string]any)["start_timestamp"]).To(Equal("2027-03-28T00:30:00Z"))
		Expect(items[2].(map[string]any)["start_timestamp"]).To(Equal("2027-03-28T01:00:00Z"))
		Expect(items[45].(map[string]any)["start_timestamp"]).To(Equal("2027-03-28T22:30:00Z"))

		status, resp = call("PUT", path+"2027-10-31", tok, dayPrices(Default, "2027-10-31", 48, pence))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		status, resp = call("PUT", path+"2027-10-31", tok, dayPrices(Default, "2027-10-31", 50, pence))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		items = resp.Map()["half_hourly_prices"].([]any)
		Expect(items).To(HaveLen(50))
		Expect(items[0].(map[string]any)["start_timestamp"]).To(Equal("2027-10-30T23:00:00Z"))
		Expect(items[49].(map[string]any)["start_timestamp"]).To(Equal("2027-10-31T23:30:00Z"))
		Expect(marketPricesRows(ctx, o.Namespace)).To(Equal(96))
	})

	It("refuses a bad declaration with a 422 naming the problem, and stores nothing", func(ctx SpecContext) {
		withItem := func(i int, key string, v any) map[string]any {
			body := dayPrices(Default, "2027-01-12", 48, pence)
			item := body["half_hourly_prices"].([]any)[i].(map[string]any)
			if v == nil && key == "delete" {
				delete(item, "price_gbp_per_mwh")
			} else {
				item[key] = v
			}
			return body
		}
		itemLoc := func(i int, key string) []any { return []any{"body", "half_hourly_prices", float64(i), key} }
		for _, bad := range []struct {
			name, path string
			body       any
			loc        []any
			typ        string
		}{
			{"47 prices", path + "2027-01-12", dayPrices(Default, "2027-01-12", 47, pence), []any{"body", "half_hourly_prices"}, "settlement_periods"},
			{"49 prices", path + "2027-01-12", dayPrices(Default, "2027-01-12", 49, pence), []any{"body", "half_hourly_prices"}, "settlement_periods"},
			{"51 prices", path + "2027-01-12", dayPrices(Default, "2027-01-12", 51, pence), []any{"body", "half_hourly_prices"}, "too_long"},
			{"a price with three decimals", path + "2027-01-12", withItem(3, "price_gbp_per_mwh", json.Number("45.678")),
				itemLoc(3, "price_gbp_per_mwh"), "decimal_max_places"},
			{"a price with an exponent", path + "2027-01-12", withItem(3, "price_gbp_per_mwh", json.Number("4.5e1")),
				itemLoc(3, "price_gbp_per_mwh"), "decimal_max_places"},
			{"a price beyond any market's", path + "2027-01-12", withItem(3, "price_gbp_per_mwh", json.Number("1000000.01")),
				itemLoc(3, "price_gbp_per_mwh"), "less_than_equal"},
			{"a null price", path + "2027-01-12", withItem(4, "price_gbp_per_mwh", nil), itemLoc(4, "price_gbp_per_mwh"), "decimal_type"},
			{"a price in a string", path + "2027-01-12", withItem(4, "price_gbp_per_mwh", "45.67"), itemLoc(4, "price_gbp_per_mwh"), "decimal_type"},
			{"no price", path + "2027-01-12", withItem(4, "delete", nil), itemLoc(4, "price_gbp_per_mwh"), "missing"},
			{"a start off the half-hour", path + "2027-01-12", withItem(5, "start_timestamp", "2027-01-12T02:15:00Z"),
				itemLoc(5, "start_timestamp"), "settlement_period"},
			{"a start of another day", path + "2027-01-12", withItem(5, "start_timestamp", "2027-01-13T02:30:00Z"),
				itemLoc(5, "start_timestamp"), "settlement_period"},
			{"a start twice", path + "2027-01-12", withItem(5, "start_timestamp", "2027-01-12T00:00:00Z"),
				itemLoc(5, "start_timestamp"), "duplicate"},
			{"a start without its zone", path + "2027-01-12", withItem(5, "start_timestamp", "2027-01-12T02:30:00"),
				itemLoc(5, "start_timestamp"), "timezone_aware"},
			{"no list", path + "2027-01-12", map[string]any{}, []any{"body", "half_hourly_prices"}, "missing"},
			{"malformed JSON", path + "2027-01-12", raw(`{"half_hourly_prices": [`), nil, "json_invalid"},
			{"a market with capitals", "/market-prices/Price_Curve/2027-01-12", dayPrices(Default, "2027-01-12", 48, pence),
				[]any{"path", "market"}, "string_pattern_mismatch"},
			{"a date that is not one", path + "2027-02-30", dayPrices(Default, "2027-01-12", 48, pence), []any{"path", "date"},
				"date_from_datetime_parsing"},
		} {
			status, resp := call("PUT", bad.path, tok, bad.body)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", bad.name, resp)
			want := SatisfyAll(HaveKeyWithValue("type", bad.typ))
			if bad.loc != nil {
				want = SatisfyAll(HaveKeyWithValue("loc", bad.loc), HaveKeyWithValue("type", bad.typ))
			}
			Expect(resp.Detail()).To(ContainElement(want), "%s: %s", bad.name, resp)
		}
		status, resp := call("PUT", path+"2027-01-12", tok, dayPrices(Default, "2027-01-12", 47, pence))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.String()).To(ContainSubstring("2027-01-12 has 48 settlement periods"))

		By("a body larger than any day's is a 413")
		status, resp = call("PUT", path+"2027-01-12", tok, raw(`{"half_hourly_prices": [], "pad": "`+strings.Repeat("x", 40<<10)+`"}`))
		Expect(status).To(Equal(http.StatusRequestEntityTooLarge), "%s", resp)

		Expect(marketPricesRows(ctx, o.Namespace)).To(BeZero())
		status, resp = call("GET", path+"2027-01-12", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("GET", "/market-prices/Price_Curve/2027-01-12", tok, nil)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.Detail()).To(ContainElement(HaveKeyWithValue("loc", []any{"path", "market"})))
	})

	It("needs prices_write to declare, and keeps each organisation's days its own", func(ctx SpecContext) {
		reader := newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite)
		status, resp := call("PUT", path+"2027-01-12", reader.token(), dayPrices(Default, "2027-01-12", 48, pence))
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		Expect(marketPricesRows(ctx, reader.Namespace)).To(BeZero())

		status, resp = call("PUT", path+"2027-01-12", tok, dayPrices(Default, "2027-01-12", 48, pence))
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		status, resp = call("GET", path+"2027-01-12", reader.token(), nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(Equal("Market prices not found for that market and day"))
		status, resp = call("GET", "/market-prices/another_market/2027-01-12", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("GET", path+"2027-01-13", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
	})

	Describe("price curves", func() {
		var (
			market                   string
			siteID, chargerID        string
			otherSiteID, otherAsset  string
			curveOf                  func(string) string
			assetCurveOf             func(string) string
			putDay                   func(date string, n int)
			atClock                  func(t time.Time)
			priceOf                  map[string]string // a declared period's price, by start (UTC)
			declared                 func(t time.Time) string
			enrolmentOf              func(mpan string, prop flexv1.PropositionName) client.ObjectKey
			onboardIn                func(mpan string, prop flexv1.PropositionName) (string, string)
			lineMPAN                 func(k int) string
			startOfTheTwelfth, tenth time.Time
		)
		BeforeEach(func(ctx SpecContext) {
			pc := &flexv1.Proposition{}
			Expect(k8sClient.Get(ctx, client.ObjectKey{Name: identity.PropositionObjectName(flexv1.PropositionPriceCurve)}, pc)).To(Succeed())
			market = pc.Spec.MarketOrDefault()
			curveOf = func(id string) string { return "/entities/site/" + id + "/price-curve" }
			assetCurveOf = func(id string) string { return "/entities/asset/" + id + "/price-curve" }
			priceOf = map[string]string{}
			putDay = func(date string, n int) {
				GinkgoHelper()
				body := dayPrices(Default, date, n, func(i int) string { return fmt.Sprintf("%d.%02d", 100+i, 25) })
				for i, item := range body["half_hourly_prices"].([]any) {
					m := item.(map[string]any)
					t, _ := time.Parse(time.RFC3339, m["start_timestamp"].(string))
					priceOf[t.UTC().Format(time.RFC3339)] = fmt.Sprint(float64(100+i) + 0.25)
				}
				status, resp := call("PUT", "/market-prices/"+market+"/"+date, tok, body)
				Expect(status).To(Equal(http.StatusCreated), "%s", resp)
			}
			declared = func(t time.Time) string {
				if p, ok := priceOf[t.UTC().Format(time.RFC3339)]; ok {
					return p
				}
				return "null"
			}
			atClock = func(t time.Time) {
				previous := *clock.Load()
				clock.Store(&t)
				DeferCleanup(func() { clock.Store(&previous) })
			}
			enrolmentOf = func(mpan string, prop flexv1.PropositionName) client.ObjectKey {
				return client.ObjectKey{Namespace: o.Namespace, Name: identity.EnrolmentName(identity.SiteNameForMPAN(mpan), prop)}
			}
			onboardIn = func(mpan string, prop flexv1.PropositionName) (string, string) {
				GinkgoHelper()
				answer := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) { b["proposition"] = string(prop) }))
				entityWaitActive(ctx, enrolmentOf(mpan, prop))
				return entitySiteID(answer), entityAssetIDs(answer)[0].(string)
			}
			lineMPAN = func(k int) string { return pricesMPAN(10*CurrentSpecReport().LeafNodeLocation.LineNumber + k) }
			siteID, chargerID = onboardIn(lineMPAN(0), flexv1.PropositionPriceCurve)
			otherSiteID, otherAsset = onboardIn(lineMPAN(1), flexv1.PropositionLimitedPause)
			startOfTheTwelfth = time.Date(2027, 1, 12, 0, 0, 0, 0, time.UTC)
			tenth = time.Date(2027, 1, 10, 0, 0, 0, 0, time.UTC)
		})

		It("runs from the current period to 23:00, listing the declared periods, to tomorrow's 23:00 once tomorrow is declared", func() {
			// 14:10 on 12 January 2027, GMT: the current period began at 14:00.
			atClock(startOfTheTwelfth.Add(14*time.Hour + 10*time.Minute))
			from := startOfTheTwelfth.Add(14 * time.Hour)
			Expect(curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))).To(BeEmpty(),
				"nothing declared: no period to 23:00 is listed")

			putDay("2027-01-12", 48)
			today := wantCurve(from, 18, declared)
			Expect(today[0]).To(Equal([2]string{"2027-01-12T14:00:00Z", "128.25"}))
			Expect(today[17]).To(Equal([2]string{"2027-01-12T22:30:00Z", "145.25"}))
			Expect(curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))).To(Equal(listed(today)))
			Expect(curvePrices(Default, mustCall("GET", assetCurveOf(chargerID), tok, nil))).To(Equal(listed(today)), "the asset's is its site's")

			By("tomorrow declared: the curve runs to 23:00 tomorrow")
			putDay("2027-01-13", 48)
			// To 23:00 today (18), then today's last two and tomorrow's first 46 (48).
			both := wantCurve(from, 18+48, declared)
			Expect(both[18]).To(Equal([2]string{"2027-01-12T23:00:00Z", "146.25"}))
			Expect(both[65]).To(Equal([2]string{"2027-01-13T22:30:00Z", "145.25"}))
			Expect(curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))).To(Equal(listed(both)))

			By("past 23:00 with tomorrow undeclared: the horizon runs to 23:00 tomorrow; only today's last period is priced")
			atClock(startOfTheTwelfth.Add(24*time.Hour + 23*time.Hour + 40*time.Minute))
			late := wantCurve(startOfTheTwelfth.Add(24*time.Hour+23*time.Hour+30*time.Minute), 47, declared)
			Expect(late[0]).To(Equal([2]string{"2027-01-13T23:30:00Z", "147.25"}))
			Expect(late[1]).To(Equal([2]string{"2027-01-14T00:00:00Z", "null"}))
			Expect(late[46]).To(Equal([2]string{"2027-01-14T22:30:00Z", "null"}))
			Expect(curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))).To(Equal(listed(late)))
			Expect(listed(late)).To(HaveLen(1))
		})

		It("crosses a clock change: 23:00 UK time is 22:00 UTC in summer", func() {
			// 19:05 GMT on 27 March 2027, the eve of the clocks going forward, with
			// the 28th (46 periods) declared.
			putDay("2027-03-28", 46)
			atClock(time.Date(2027, 3, 27, 19, 5, 0, 0, time.UTC))
			from := time.Date(2027, 3, 27, 19, 0, 0, 0, time.UTC)
			// 19:00Z to 23:00 GMT on the 27th (8 periods) and its last two, null; then 28 March
			// to 23:00 BST = 22:00Z (00:00Z to 22:00Z: 44 periods).
			curve := wantCurve(from, 8+2+44, declared)
			Expect(curve[0][1]).To(Equal("null"))
			Expect(curve[9]).To(Equal([2]string{"2027-03-27T23:30:00Z", "null"}))
			Expect(curve[10]).To(Equal([2]string{"2027-03-28T00:00:00Z", "100.25"}))
			Expect(curve[53]).To(Equal([2]string{"2027-03-28T21:30:00Z", "143.25"}))
			Expect(curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))).To(Equal(listed(curve)))
		})

		It("reads the market the price_curve Proposition names", Serial, func(ctx SpecContext) {
			atClock(startOfTheTwelfth.Add(22 * time.Hour))
			putDay("2027-01-12", 48)
			Expect(curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))[0]).To(Equal([2]string{"2027-01-12T22:00:00Z", "144.25"}))

			key := client.ObjectKey{Name: identity.PropositionObjectName(flexv1.PropositionPriceCurve)}
			pc := &flexv1.Proposition{}
			Expect(k8sClient.Get(ctx, key, pc)).To(Succeed())
			previous := pc.Spec.Market
			pc.Spec.Market = "uk_day_ahead"
			Expect(k8sClient.Update(ctx, pc)).To(Succeed())
			DeferCleanup(func(ctx SpecContext) {
				Eventually(func() error {
					pc := &flexv1.Proposition{}
					if err := k8sClient.Get(ctx, key, pc); err != nil {
						return err
					}
					pc.Spec.Market = previous
					return k8sClient.Update(ctx, pc)
				}).Should(Succeed())
			})
			By("the curve is the named market's: nothing declared there yet")
			Eventually(func(g Gomega) [][2]string { return curvePrices(g, mustCallG(g, "GET", curveOf(siteID), tok, nil)) }).
				Should(BeEmpty())
			status, resp := call("PUT", "/market-prices/uk_day_ahead/2027-01-12", tok, dayPrices(Default, "2027-01-12", 48, pence))
			Expect(status).To(Equal(http.StatusCreated), "%s", resp)
			Expect(curvePrices(Default, mustCall("GET", assetCurveOf(chargerID), tok, nil))).
				To(Equal([][2]string{{"2027-01-12T22:00:00Z", "44.44"}, {"2027-01-12T22:30:00Z", "45.45"}}))
		})

		It("is not found for a site not enrolled in price_curve, an unknown or another organisation's site or asset", func(ctx SpecContext) {
			atClock(tenth)
			for _, p := range []string{curveOf(otherSiteID), assetCurveOf(otherAsset), curveOf(uuid.NewString()), assetCurveOf(uuid.NewString())} {
				status, resp := call("GET", p, tok, nil)
				Expect(status).To(Equal(http.StatusNotFound), "%s: %s", p, resp)
				Expect(resp.Detail()).To(BeAssignableToTypeOf(""))
			}
			other := newOrg(ctx).token()
			for _, p := range []string{curveOf(siteID), assetCurveOf(chargerID)} {
				status, resp := call("GET", p, other, nil)
				Expect(status).To(Equal(http.StatusNotFound), "%s: %s", p, resp)
				Expect(resp.String()).NotTo(ContainSubstring(siteID))
			}
			for _, p := range []string{curveOf("not-a-uuid"), assetCurveOf("not-a-uuid")} {
				status, resp := call("GET", p, tok, nil)
				Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", p, resp)
			}
			By("a site that leaves price_curve has no curve any more")
			Expect(mustCall("GET", curveOf(siteID), tok, nil)).To(Equal(map[string]any{"half_hourly_traded_prices": []any{}}),
				"nothing declared: a curve, with no period listed")
			mustCall("POST", "/entities/site/"+siteID+"/unenrol", tok, map[string]any{"proposition": "price_curve"})
			Eventually(func() int {
				status, _ := call("GET", curveOf(siteID), tok, nil)
				return status
			}).Should(Equal(http.StatusNotFound))
			status, _ := call("GET", assetCurveOf(chargerID), tok, nil)
			Expect(status).To(Equal(http.StatusNotFound))
		})

		It("keeps the curve until PostgreSQL notifies a declaration, any replica's, and keeps nothing while it cannot hear", Serial, func(ctx SpecContext) {
			atClock(startOfTheTwelfth.Add(14*time.Hour + 10*time.Minute))
			Eventually(apiSrv.KeepsPrices).Should(BeTrue())
			putDay("2027-01-12", 48)
			first := func() string {
				GinkgoHelper()
				return curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))[0][1]
			}
			Expect(first()).To(Equal("128.25"))
			rewrite := func(centi int) {
				GinkgoHelper()
				_, err := database.Pool.Exec(ctx, `UPDATE market_prices SET price_centi = $1
					WHERE organisation = $2 AND market = $3 AND start_at = $4`, centi, o.Namespace, market,
					startOfTheTwelfth.Add(14*time.Hour))
				Expect(err).NotTo(HaveOccurred())
			}
			// A row changed behind the store's back notifies nobody: the kept curve is served.
			// (The PUT's own notification may still be on its way and drop the first kept
			// curve, as may any notification racing a fill: hence the retries.)
			rewritten := 10
			kept := func(g Gomega) {
				before := first()
				rewritten++
				rewrite(rewritten)
				g.Expect(first()).To(Equal(before), "kept, not the database's %d", rewritten)
			}
			Eventually(kept).Should(Succeed())

			By("another replica declares the day: its commit's notification reaches this one")
			other, err := db.Open(ctx, database.URL)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(other.Close)
			day := prices.DayOf(startOfTheTwelfth)
			periods := day.Periods()
			declaredElsewhere := make([]prices.Price, 0, len(periods))
			for _, start := range periods {
				declaredElsewhere = append(declaredElsewhere, prices.Price{Start: start, Centi: 99999})
			}
			_, err = (&pricestore.Store{Pool: other}).Put(ctx, o.Namespace, market, day, declaredElsewhere, "another-replica", time.Now())
			Expect(err).NotTo(HaveOccurred())
			Eventually(first).Should(Equal("999.99"))

			By("the listening connection is lost: nothing kept is served until it listens again")
			var ended int
			Expect(other.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE datname = current_database() AND query = 'LISTEN '||$1`, pricestore.ChangedChannel).Scan(&ended)).To(Succeed())
			Expect(ended).To(Equal(1))
			Eventually(apiSrv.KeepsPrices).Should(BeFalse(), "the fault happened")
			rewrite(22)
			Eventually(first).Should(Equal("0.22"), "read from the database")
			Eventually(apiSrv.KeepsPrices).Should(BeTrue(), "listening again")
			Eventually(kept).Should(Succeed(), "kept again")
		})

		It("answers 503 with Retry-After while the database is down, storing nothing", Serial, func(ctx SpecContext) {
			if !database.CanStop() {
				Skip("the test database is not this process's server ($FLEXSITE_TEST_DATABASE_URL)")
			}
			atClock(startOfTheTwelfth.Add(14 * time.Hour))
			Expect(database.Stop()).To(Succeed())
			stopped := true
			DeferCleanup(func(ctx SpecContext) {
				if stopped {
					Expect(database.Start(ctx)).To(Succeed())
				}
			})
			for _, req := range []struct {
				method, path string
				body         any
			}{
				{"PUT", "/market-prices/" + market + "/2027-01-12", dayPrices(Default, "2027-01-12", 48, pence)},
				{"GET", "/market-prices/" + market + "/2027-01-12", nil},
				{"GET", curveOf(siteID), nil},
				{"GET", assetCurveOf(chargerID), nil},
			} {
				status, header, resp := callWithHeader(req.method, req.path, tok, req.body)
				Expect(status).To(Equal(http.StatusServiceUnavailable), "%s %s: %s", req.method, req.path, resp)
				Expect(header.Get("Retry-After")).To(MatchRegexp(`^[1-9][0-9]*$`))
				Expect(resp.Detail()).To(ContainSubstring("nothing was stored"))
			}
			Expect(database.Start(ctx)).To(Succeed())
			stopped = false
			Eventually(func() error { _, err := database.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
			Expect(marketPricesRows(ctx, o.Namespace)).To(BeZero())
			Eventually(func(g Gomega) {
				status, resp := call("PUT", "/market-prices/"+market+"/2027-01-12", tok, dayPrices(g, "2027-01-12", 48, pence))
				g.Expect(status).To(Equal(http.StatusCreated), "%s", resp)
			}).Should(Succeed())
			Expect(curvePrices(Default, mustCall("GET", curveOf(siteID), tok, nil))).To(HaveLen(18))
		})
	})
})
