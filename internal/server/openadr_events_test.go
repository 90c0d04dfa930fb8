package server_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
)

// The OpenADR door's events (docs/openadr.md, "Events"): one per dispatch, seen by the business
// logic and by the VEN client holding the asset; declared through POST /events as through REST
// POST /flex-events; cancelled by DELETE. The dispatches are issued straight into the database
// (dispatchstore.Issue), as the FlexEvent controller issues them.
var _ = Describe("The OpenADR door: events", Ordered, func() {
	const mpan = "1200000000527"
	var (
		o, other                   org
		tok, bl, ven, stranger     string
		otherBL                    string
		siteID, chargerID, battery string
		start                      time.Time
		store                      *dispatchstore.Store
	)
	issue := func(ctx SpecContext, flexEvent, proposition string, ds ...dispatchstore.Dispatch) {
		GinkgoHelper()
		for i := range ds {
			ds[i].FlexEvent, ds[i].SiteID, ds[i].MarketID, ds[i].Proposition = flexEvent, siteID, proposition, proposition
			ds[i].From, ds[i].To, ds[i].EventTimestamp = start, start.Add(time.Hour), start.Add(-time.Hour)
		}
		_, err := store.Issue(ctx, o.Namespace, apiServer.URL, ds, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
	}
	eventIDOf := func(flexEvent, asset string) string { return dispatch.EventID(o.Namespace, flexEvent, asset).String() }
	idsOf := func(body response) []string {
		GinkgoHelper()
		var events []map[string]any
		Expect(json.Unmarshal(body, &events)).To(Succeed(), "%s", body)
		out := make([]string, 0, len(events))
		for _, e := range events {
			out = append(out, e["id"].(string))
		}
		return out
	}
	search := func(token, query string) []string {
		GinkgoHelper()
		status, body := oadrCall("GET", "/events"+query, token, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		return idsOf(body)
	}

	BeforeAll(func(ctx SpecContext) {
		needDatabase()
		store = &dispatchstore.Store{Pool: testDB.Pool}
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		other = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		tok = o.token()
		// Two VEN clients of the organisation: one whose VEN holds the charger, one holding nothing.
		venClient := org{Namespace: o.Namespace, Username: o.Username + "-ven", Password: o.Password + "-ven"}
		strangerClient := org{Namespace: o.Namespace, Username: o.Username + "-stranger", Password: o.Password + "-stranger"}
		for _, c := range []org{venClient, strangerClient} {
			Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: c.Namespace,
				Username: c.Username, Password: c.Password, Roles: []flexv1.Role{flexv1.RoleEntityRead, flexv1.RoleEntityWrite}})).To(Succeed())
		}
		bl, ven, stranger, otherBL = o.oadrToken(), venClient.oadrToken(), strangerClient.oadrToken(), other.oadrToken()

		siteID = onboardedSite(tok, mpan)
		chargerID = mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		battery = mustCall("GET", "/entities/asset/external-id/battery-"+mpan, tok, nil)["id"].(string)
		venID := uuid.New()
		_, err := testDB.Pool.Exec(ctx, `INSERT INTO openadr_vens (organisation, id, client_name, ven_name) VALUES ($1, $2, $3, 'ven-1')`,
			o.Namespace, venID, strings.ToLower(venClient.Username))
		Expect(err).NotTo(HaveOccurred())
		_, err = testDB.Pool.Exec(ctx, `INSERT INTO openadr_resources (organisation, id, ven_id, resource_name) VALUES ($1, $2, $3, $4)`,
			o.Namespace, uuid.New(), venID, chargerID)
		Expect(err).NotTo(HaveOccurred())
		start = time.Now().UTC().Truncate(30 * time.Minute).Add(3 * time.Hour)
	})

	It("answers a REST flex event's dispatches as events: to the business logic, and to the VEN holding the asset only", func(ctx SpecContext) {
		status, created := call("POST", "/flex-events", tok, map[string]any{"proposition": "limited_pause",
			"start_at": start.Format(time.RFC3339), "end_at": start.Add(time.Hour).Format(time.RFC3339),
			"direction": "turn_down", "rate_pence_per_kwh": 25, "site_ids": []any{siteID}})
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		restID := created.Map()["id"].(string)
		issue(ctx, restID, "limited_pause", dispatchstore.Dispatch{AssetID: chargerID, LevelKW: 0},
			dispatchstore.Dispatch{AssetID: battery, LevelKW: 5})
		chargerEvent, batteryEvent := eventIDOf(restID, chargerID), eventIDOf(restID, battery)

		By("the business logic sees both; the VEN holding the charger its event only; a VEN holding nothing none")
		Expect(search(bl, "")).To(ContainElements(chargerEvent, batteryEvent))
		Expect(search(bl, "?programID=limited_pause")).To(ContainElements(chargerEvent, batteryEvent))
		Expect(search(bl, "?programID=price_curve")).NotTo(ContainElements(chargerEvent, batteryEvent))
		Expect(search(bl, "?targetType=RESOURCE_NAME&targetValues="+battery)).To(ConsistOf(batteryEvent))
		Expect(search(ven, "")).To(ConsistOf(chargerEvent))
		Expect(search(ven, "?targetType=RESOURCE_NAME&targetValues="+battery)).To(BeEmpty())
		Expect(search(stranger, "")).To(BeEmpty())
		Expect(search(otherBL, "")).NotTo(ContainElements(chargerEvent, batteryEvent))
		Expect(search(bl, "?limit=1")).To(HaveLen(1))
		Expect(search(bl, "?skip=1&limit=1")).To(HaveLen(1))

		By("the event: its target, its window in half-hours with the dispatch's level in kW, and the reports it asks for")
		status, body := oadrCall("GET", "/events/"+batteryEvent, bl, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		ev := body.Map()
		Expect(ev).To(HaveKeyWithValue("programID", "limited_pause"))
		Expect(ev).To(HaveKeyWithValue("eventName", restID))
		Expect(ev["targets"]).To(Equal([]any{map[string]any{"type": "RESOURCE_NAME", "values": []any{battery}}}))
		Expect(ev["intervalPeriod"]).To(Equal(map[string]any{"start": start.Format(time.RFC3339), "duration": "PT1H"}))
		intervals := ev["intervals"].([]any)
		Expect(intervals).To(HaveLen(2))
		Expect(intervals[1]).To(Equal(map[string]any{"id": 1.0, "intervalPeriod": map[string]any{
			"start": start.Add(30 * time.Minute).Format(time.RFC3339), "duration": "PT30M"},
			"payloads": []any{map[string]any{"type": "DISPATCH_SETPOINT", "values": []any{5.0}}}}))
		Expect(ev["reportDescriptors"]).To(ContainElements(HaveKeyWithValue("payloadType", "OPERATING_STATE"),
			HaveKeyWithValue("payloadType", "USAGE")))
		status, _ = oadrCall("GET", "/events/"+chargerEvent, ven, nil)
		Expect(status).To(Equal(http.StatusOK))
		for _, tc := range []struct{ token, id string }{{ven, batteryEvent}, {stranger, chargerEvent}, {otherBL, chargerEvent},
			{otherBL, restID}, {ven, restID}, {bl, "not-an-event"}} {
			status, body := oadrCall("GET", "/events/"+tc.id, tc.token, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", tc.id, body)
		}
	})

	It("declares a flex event from POST /events through the REST API's rules, and carries price_curve's prices", func(ctx SpecContext) {
		day := prices.DayOf(start)
		periods := day.Periods()
		declared := make([]prices.Price, len(periods))
		for i, t := range periods {
			declared[i] = prices.Price{Start: t, Centi: prices.Centi(5000 + i)}
		}
		_, err := (&pricestore.Store{Pool: testDB.Pool}).Put(ctx, o.Namespace, "price_curve", day, declared, "test", time.Now())
		Expect(err).NotTo(HaveOccurred())
		body := map[string]any{"programID": "price_curve",
			"intervalPeriod": map[string]any{"start": start.Format(time.RFC3339), "duration": "PT1H"},
			"intervals": []any{map[string]any{"id": 0, "payloads": []any{
				map[string]any{"type": "FLEX_DIRECTION", "values": []any{"turn_up"}},
				map[string]any{"type": "FLEX_RATE", "values": []any{12.5}}}}},
			"targets": []any{map[string]any{"type": "SITE_ID", "values": []any{siteID}}}}

		By("refusing bad input with a 400 problem, nothing declared")
		countEvents := func() int {
			GinkgoHelper()
			list := &flexv1.FlexEventList{}
			Expect(k8sClient.List(ctx, list)).To(Succeed())
			n := 0
			for _, e := range list.Items {
				if e.Namespace == o.Namespace {
					n++
				}
			}
			return n
		}
		before := countEvents()
		with := func(key string, v any) map[string]any {
			out := map[string]any{}
			for k, x := range body {
				out[k] = x
			}
			out[key] = v
			return out
		}
		for _, bad := range []any{
			with("programID", "free_money"),
			with("intervalPeriod", map[string]any{"start": start.Format(time.RFC3339), "duration": "P1M"}),
			with("intervalPeriod", map[string]any{"start": start.Add(7 * time.Minute).Format(time.RFC3339), "duration": "PT1H"}),
			with("intervals", []any{map[string]any{"id": 0, "payloads": []any{
				map[string]any{"type": "DISPATCH_SETPOINT", "values": []any{3}}}}}),
			with("intervals", []any{map[string]any{"id": 0, "payloads": []any{
				map[string]any{"type": "FLEX_DIRECTION", "values": []any{"sideways"}},
				map[string]any{"type": "FLEX_RATE", "values": []any{12.5}}}}}),
			with("targets", []any{map[string]any{"type": "SITE_ID", "values": []any{"no-such-site"}}}),
			with("targets", []any{map[string]any{"type": "RESOURCE_NAME", "values": []any{chargerID}}}),
			with("intervalPeriod", "tomorrow"),
			`{"programID": "price_curve", "intervals": [`,
		} {
			status, resp := oadrCall("POST", "/events", bl, bad)
			Expect(status).To(Equal(http.StatusBadRequest), "%v: %s", bad, resp)
		}
		status, resp := oadrCall("POST", "/events", ven, body)
		Expect(status).To(Equal(http.StatusForbidden), "a VEN client declares no event: %s", resp)
		Expect(countEvents()).To(Equal(before), "nothing declared")

		By("declaring it: 201 with the flex event as an event, read back at its id")
		status, resp = oadrCall("POST", "/events", bl, body)
		Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		flexID := resp.Map()["id"].(string)
		Expect(resp.Map()).To(HaveKeyWithValue("programID", "price_curve"))
		status, got := oadrCall("GET", "/events/"+flexID, bl, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", got)
		Expect(got.Map()).To(Equal(resp.Map()))
		rec := mustCall("GET", "/flex-events/"+flexID, tok, nil)
		Expect(rec).To(HaveKeyWithValue("direction", "turn_up"))
		Expect(rec).To(HaveKeyWithValue("rate_pence_per_kwh", 12.5))
		Expect(rec["site_ids"]).To(Equal([]any{siteID}))

		By("its dispatches are events with the declared prices per half-hour")
		issue(ctx, flexID, "price_curve", dispatchstore.Dispatch{AssetID: chargerID, LevelKW: -7.4})
		id := eventIDOf(flexID, chargerID)
		Expect(search(ven, "?programID=price_curve")).To(ConsistOf(id))
		status, got = oadrCall("GET", "/events/"+id, ven, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", got)
		first := got.Map()["intervals"].([]any)[0].(map[string]any)
		i := 0
		for i < len(periods) && !periods[i].Equal(start) {
			i++
		}
		Expect(first["payloads"]).To(Equal([]any{map[string]any{"type": "DISPATCH_SETPOINT", "values": []any{-7.4}},
			map[string]any{"type": "PRICE", "values": []any{float64(5000+i) / 100}}}))
		Expect(got.Map()["payloadDescriptors"]).To(ContainElement(And(HaveKeyWithValue("payloadType", "PRICE"),
			HaveKeyWithValue("units", "MWH"), HaveKeyWithValue("currency", "GBP"))))

		By("an update is refused; the dispatch's own event is not cancelled alone")
		status, _ = oadrCall("PUT", "/events/"+flexID, bl, resp.Map())
		Expect(status).To(Equal(http.StatusForbidden))
		status, refused := oadrCall("DELETE", "/events/"+id, bl, nil)
		Expect(status).To(Equal(http.StatusForbidden), "%s", refused)
		Expect(refused.Map()["detail"]).To(ContainSubstring("/events/" + flexID))
		status, _ = oadrCall("DELETE", "/events/"+flexID, otherBL, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		status, _ = oadrCall("DELETE", "/events/"+flexID, ven, nil)
		Expect(status).To(Equal(http.StatusForbidden))

		By("cancelling the flex event deletes its events")
		Eventually(func(g Gomega) {
			ev := &flexv1.FlexEvent{}
			g.Expect(k8sClient.Get(ctx, types.NamespacedName{Namespace: o.Namespace, Name: flexID}, ev)).To(Succeed())
			g.Expect(ev.Finalizers).To(ContainElement(flexv1.DispatchFinalizer))
		}).Should(Succeed())
		status, gone := oadrCall("DELETE", "/events/"+flexID, bl, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", gone)
		Expect(gone.Map()).To(HaveKeyWithValue("id", flexID))
		Eventually(func(g Gomega) {
			status, body := oadrCallG(g, "GET", "/events?programID=price_curve", ven, nil)
			g.Expect(status).To(Equal(http.StatusOK))
			g.Expect(string(body)).To(MatchJSON(`[]`))
			status, _ = oadrCallG(g, "GET", "/events/"+id, ven, nil)
			g.Expect(status).To(Equal(http.StatusNotFound))
			status, _ = oadrCallG(g, "GET", "/events/"+flexID, bl, nil)
			g.Expect(status).To(Equal(http.StatusNotFound))
		}).Should(Succeed())
		var outboxed int
		Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM outbox WHERE organisation = $1 AND event_id = $2`,
			o.Namespace, dispatchstore.CancelledEventID(uuid.MustParse(id))).Scan(&outboxed)).To(Succeed())
		Expect(outboxed).To(Equal(1), "dispatch.cancelled is in the outbox")
	})
})
