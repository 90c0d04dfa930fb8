package server_test

import (
	"context"
	"net/http"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The OpenADR door's reports close the loop: OPERATING_STATE drives the dispatch's state as
// the REST callback does, USAGE becomes readings. The flex events are made through POST
// /flex-events; their dispatches are issued straight into the database as the dispatch
// callback's specs do (the FlexEvent controller issuing them is another part's).
var _ = Describe("The OpenADR door: reports", Ordered, func() {
	var (
		o, other                   org
		logic, venA, venB, otherTk string
		siteID                     string
		chargerID, batteryID       string
		started, future            string // flex event ids
		startedAt, futureAt        time.Time
		store                      *dispatchstore.Store
	)
	mpan := validMPAN(5202)
	eventOf := func(flexEvent, asset string) string { return dispatch.EventID(o.Namespace, flexEvent, asset).String() }
	statusOf := func(ctx context.Context, id string) string {
		GinkgoHelper()
		var s string
		Expect(testDB.Pool.QueryRow(ctx, `SELECT status FROM dispatches WHERE organisation = $1 AND event_id = $2`,
			o.Namespace, id).Scan(&s)).To(Succeed())
		return s
	}
	state := func(s any) map[string]any { return map[string]any{"type": "OPERATING_STATE", "values": []any{s}} }
	usage := func(kwh any) map[string]any { return map[string]any{"type": "USAGE", "values": []any{kwh}} }
	// report is a report of one resource whose intervals carry payloads, one interval each; a
	// period makes the intervals follow one another from its start.
	report := func(event, resource string, period map[string]any, payloads ...map[string]any) map[string]any {
		intervals := make([]any, len(payloads))
		for i, p := range payloads {
			intervals[i] = map[string]any{"id": i, "payloads": []any{p}}
		}
		res := map[string]any{"resourceName": resource, "intervals": intervals}
		if period != nil {
			res["intervalPeriod"] = period
		}
		return map[string]any{"programID": "limited_pause", "eventID": event, "clientName": "VEN-A",
			"resources": []any{res}}
	}
	halfHours := func(start time.Time) map[string]any {
		return map[string]any{"start": start.Format(time.RFC3339), "duration": "PT30M"}
	}
	flexEvent := func(tok string, start time.Time) string {
		GinkgoHelper()
		status, created := call("POST", "/flex-events", tok, map[string]any{"proposition": "limited_pause",
			"start_at": start.Format(time.RFC3339), "end_at": start.Add(time.Hour).Format(time.RFC3339),
			"direction": "turn_down", "rate_pence_per_kwh": 25, "site_ids": []any{siteID}})
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		return created.Map()["id"].(string)
	}
	issue := func(ctx context.Context, flexEvent string, start time.Time, assets ...string) {
		GinkgoHelper()
		ds := make([]dispatchstore.Dispatch, len(assets))
		for i, a := range assets {
			ds[i] = dispatchstore.Dispatch{FlexEvent: flexEvent, SiteID: siteID, AssetID: a, MarketID: "limited_pause",
				Proposition: "limited_pause", From: start, To: start.Add(time.Hour), EventTimestamp: start.Add(-time.Hour)}
		}
		_, err := store.Issue(ctx, o.Namespace, "https://flexsite.test", ds, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
	}
	counts := func(ctx context.Context) []int {
		GinkgoHelper()
		return []int{rowsOf(ctx, "openadr_reports", o.Namespace), rowsOf(ctx, "readings", o.Namespace),
			rowsOf(ctx, "dispatch_status_changes", o.Namespace)}
	}

	BeforeAll(func(ctx SpecContext) {
		needDatabase()
		store = &dispatchstore.Store{Pool: testDB.Pool}
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		other = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		a := o.venClient(ctx, "ven-a", flexv1.RoleEntityRead, flexv1.RoleEntityWrite)
		b := o.venClient(ctx, "ven-b", flexv1.RoleEntityRead, flexv1.RoleEntityWrite)
		logic, venA, venB, otherTk = o.oadrToken(), a.oadrToken(), b.oadrToken(), other.oadrToken()
		tok := o.token()
		siteID = onboardedSite(tok, mpan)
		chargerID = mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		batteryID = mustCall("GET", "/entities/asset/external-id/battery-"+mpan, tok, nil)["id"].(string)
		ven := oadrCreated("/vens", venA, map[string]any{"venName": "reporting-ven"})["id"].(string)
		for _, asset := range []string{chargerID, batteryID} {
			oadrCreated("/vens/"+ven+"/resources", venA, map[string]any{"resourceName": asset})
		}
		oadrCreated("/vens", venB, map[string]any{"venName": "idle-ven"})

		now := clock.Load().UTC()
		startedAt = now.Truncate(30 * time.Minute).Add(-30 * time.Minute)
		futureAt = now.Truncate(30 * time.Minute).Add(3 * time.Hour)
		started, future = flexEvent(tok, startedAt), flexEvent(tok, futureAt)
		issue(ctx, started, startedAt, chargerID, batteryID)
		issue(ctx, future, futureAt, chargerID, batteryID)
	})

	It("drives the dispatch's state as the callback does, and answers the report back as it was sent", func(ctx SpecContext) {
		By("any report before the window: ACCEPTED")
		id := eventOf(future, chargerID)
		created := oadrCreated("/reports", venA, report(id, chargerID, nil, state("NORMAL")))
		Expect(created).To(HaveKeyWithValue("objectType", "REPORT"))
		Expect(created).To(HaveKeyWithValue("eventID", id))
		Expect(created).To(HaveKeyWithValue("clientName", "VEN-A"))
		Expect(created["resources"]).To(Equal([]any{map[string]any{"resourceName": chargerID,
			"intervals": []any{map[string]any{"id": 0.0, "payloads": []any{state("NORMAL")}}}}}))
		Expect(statusOf(ctx, id)).To(Equal("accepted"))
		reportID := created["id"].(string)
		status, got := oadrCall("GET", "/reports/"+reportID, venA, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(got.Map()).To(Equal(created))

		By("opted out: REJECTED; after it, any report is refused as the callback refuses it: 409, nothing written")
		battery := eventOf(future, batteryID)
		oadrCreated("/reports", venA, report(battery, batteryID, nil, state("RUNNING_OPTED_OUT")))
		Expect(statusOf(ctx, battery)).To(Equal("rejected"))
		before := counts(ctx)
		for _, s := range []string{"NORMAL", "RUNNING_CURTAILED", "ERROR"} {
			status, body := oadrCall("POST", "/reports", venA, report(battery, batteryID, nil, state(s)))
			Expect(status).To(Equal(http.StatusConflict), "%s: %s", s, body)
		}
		Expect(counts(ctx)).To(Equal(before))
		Expect(statusOf(ctx, battery)).To(Equal("rejected"))

		By("curtailed inside the window: EXECUTED; an error after it: 409")
		running := eventOf(started, chargerID)
		oadrCreated("/reports", venA, report(running, chargerID, nil, state("RUNNING_CURTAILED")))
		Expect(statusOf(ctx, running)).To(Equal("executed"))
		status, body := oadrCall("POST", "/reports", venA, report(running, chargerID, nil, state("SGD_ERROR_CONDITION")))
		Expect(status).To(Equal(http.StatusConflict), "%s", body)
		By("an error: FAILED")
		failing := eventOf(started, batteryID)
		oadrCreated("/reports", venA, report(failing, batteryID, nil, state("IDLE_NORMAL"), state("ERROR")))
		Expect(statusOf(ctx, failing)).To(Equal("failed"))

		By("an event the client does not see, or another organisation's, a wrong program or resource: 400")
		before = counts(ctx)
		for _, tc := range []struct {
			tok  string
			body map[string]any
			want int
		}{
			{venB, report(id, chargerID, nil, state("NORMAL")), http.StatusBadRequest},
			{otherTk, report(id, chargerID, nil, state("NORMAL")), http.StatusBadRequest},
			{venA, report("not-a-dispatch", chargerID, nil, state("NORMAL")), http.StatusBadRequest},
			{venA, report(eventOf("no-such-flex-event", chargerID), chargerID, nil, state("NORMAL")), http.StatusBadRequest},
			{venA, report(id, batteryID, nil, state("NORMAL")), http.StatusBadRequest},
			{venA, report(id, "AGGREGATED_REPORT", nil, state("NORMAL")), http.StatusBadRequest},
			{venA, report(id, chargerID, nil, state("DANCING")), http.StatusBadRequest},
			{venA, func() map[string]any {
				r := report(id, chargerID, nil, state("NORMAL"))
				r["programID"] = "price_curve"
				return r
			}(), http.StatusBadRequest},
		} {
			status, body := oadrCall("POST", "/reports", tc.tok, tc.body)
			Expect(status).To(Equal(tc.want), "%v: %s", tc.body, body)
		}
		Expect(counts(ctx)).To(Equal(before))

		By("a VEN client sees its own reports; the business logic all; another organisation none")
		Expect(oadrList("/reports", venA)).To(HaveLen(4))
		Expect(oadrList("/reports", venB)).To(BeEmpty())
		Expect(oadrList("/reports", logic)).To(HaveLen(4))
		Expect(oadrList("/reports", otherTk)).To(BeEmpty())
		Expect(field(oadrList("/reports?eventID="+id, logic), "id")).To(Equal([]any{reportID}))
		Expect(oadrList("/reports?clientName=VEN-A&programID=limited_pause&limit=2", logic)).To(HaveLen(2))
		Expect(oadrList("/reports?clientName=VEN-B", logic)).To(BeEmpty())
		for _, tok := range []string{venB, otherTk} {
			for _, method := range []string{"GET", "PUT", "DELETE"} {
				status, body := oadrCall(method, "/reports/"+reportID, tok, report(id, chargerID, nil, state("NORMAL")))
				Expect(status).To(Equal(http.StatusNotFound), "%s: %s", method, body)
			}
		}

		By("an update is judged again: refused, the stored report stays as it was")
		status, body = oadrCall("PUT", "/reports/"+reportID, venA, report(id, chargerID, nil, state("IDLE_OPTED_OUT")))
		Expect(status).To(Equal(http.StatusConflict), "%s", body)
		status, got = oadrCall("GET", "/reports/"+reportID, logic, nil)
		Expect(status).To(Equal(http.StatusOK))
		Expect(got.Map()).To(Equal(created))
		renamed := report(id, chargerID, nil, state("IDLE_NORMAL"))
		renamed["reportName"] = "morning check"
		status, body = oadrCall("PUT", "/reports/"+reportID, venA, renamed)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		Expect(body.Map()).To(HaveKeyWithValue("reportName", "morning check"))
		Expect(body.Map()["createdDateTime"]).To(Equal(created["createdDateTime"]))

		By("a delete removes the stored report only: the dispatch's state stays")
		status, _ = oadrCall("DELETE", "/reports/"+reportID, venA, nil)
		Expect(status).To(Equal(http.StatusOK))
		status, _ = oadrCall("GET", "/reports/"+reportID, venA, nil)
		Expect(status).To(Equal(http.StatusNotFound))
		Expect(statusOf(ctx, id)).To(Equal("accepted"))
	})

	It("stores USAGE as readings under the readings' rules, in kWh per interval", func(ctx SpecContext) {
		charger := eventOf(started, chargerID)
		oadrCreated("/reports", venA, report(charger, chargerID, halfHours(startedAt), usage(1.5), usage(2)))
		oadrCreated("/reports", venA, report(eventOf(started, batteryID), batteryID, halfHours(startedAt), usage(-1)))
		stored := storedReadings(ctx, o.Namespace)
		got := make([]storedReading, 0, len(stored))
		for _, r := range stored {
			r.Partition = ""
			r.Start, r.End = r.Start.UTC(), r.End.UTC()
			got = append(got, r)
		}
		half := 30 * time.Minute
		Expect(got).To(ConsistOf(
			storedReading{siteID, chargerID, "charger_consumption_energy_kwh", "", startedAt, startedAt.Add(half), 1.5},
			storedReading{siteID, chargerID, "charger_consumption_energy_kwh", "", startedAt.Add(half), startedAt.Add(2 * half), 2},
			storedReading{siteID, batteryID, "battery_inverter_import_kw", "", startedAt, startedAt.Add(half), -2}))

		By("a reading the rules refuse refuses the report whole: 400 naming the interval, nothing written")
		before := counts(ctx)
		for _, body := range []map[string]any{
			report(charger, chargerID, halfHours(startedAt), usage(1), usage(100)),
			report(charger, chargerID, halfHours(startedAt), usage(-1)),
			report(charger, chargerID, map[string]any{"start": startedAt.Format(time.RFC3339), "duration": "PT1H"}, usage(1)),
			report(charger, chargerID, map[string]any{"start": startedAt.Format(time.RFC3339), "duration": "P1M"}, usage(1)),
			report(charger, chargerID, nil, usage(1)),
			report(charger, chargerID, halfHours(startedAt.AddDate(0, 2, 0)), usage(1)),
		} {
			status, resp := oadrCall("POST", "/reports", venA, body)
			Expect(status).To(Equal(http.StatusBadRequest), "%v: %s", body, resp)
			Expect(resp.Map()["detail"]).To(ContainSubstring("intervals"))
		}
		Expect(counts(ctx)).To(Equal(before))
	})

	It("refuses bad input with a 400 problem and writes nothing", func(ctx SpecContext) {
		id := eventOf(started, chargerID)
		good := func(mutate func(map[string]any)) map[string]any {
			r := report(id, chargerID, halfHours(startedAt), usage(1))
			mutate(r)
			return r
		}
		interval := func(r map[string]any) map[string]any {
			return r["resources"].([]any)[0].(map[string]any)["intervals"].([]any)[0].(map[string]any)
		}
		before := counts(ctx)
		for _, body := range []any{
			raw(`{"programID": "limited_pause",`),
			raw(`"a report"`),
			good(func(r map[string]any) { r["eventID"] = 5 }),
			good(func(r map[string]any) { r["eventID"] = "has spaces" }),
			good(func(r map[string]any) { r["clientName"] = "" }),
			good(func(r map[string]any) { r["objectType"] = "VEN" }),
			good(func(r map[string]any) { delete(r, "resources") }),
			good(func(r map[string]any) { r["resources"] = "all of them" }),
			good(func(r map[string]any) { interval(r)["id"] = "one" }),
			good(func(r map[string]any) { interval(r)["id"] = 1 << 40 }),
			good(func(r map[string]any) {
				interval(r)["payloads"] = []any{map[string]any{"type": "PRICE", "values": []any{1}}}
			}),
			good(func(r map[string]any) {
				interval(r)["payloads"] = []any{map[string]any{"type": "USAGE", "values": []any{1, 2}}}
			}),
			good(func(r map[string]any) {
				interval(r)["payloads"] = []any{map[string]any{"type": "USAGE", "values": []any{"1"}}}
			}),
			good(func(r map[string]any) { interval(r)["payloads"] = []any{state(3)} }),
			good(func(r map[string]any) {
				r["payloadDescriptors"] = []any{map[string]any{"payloadType": "BASELINE"}}
			}),
			good(func(r map[string]any) {
				r["payloadDescriptors"] = []any{map[string]any{"payloadType": "USAGE", "units": "MW"}}
			}),
			good(func(r map[string]any) {
				r["payloadDescriptors"] = []any{map[string]any{"payloadType": "USAGE", "objectType": "EVENT_PAYLOAD_DESCRIPTOR"}}
			}),
			good(func(r map[string]any) {
				r["resources"].([]any)[0].(map[string]any)["intervalPeriod"] = map[string]any{"start": "yesterday", "duration": "PT30M"}
			}),
			good(func(r map[string]any) {
				r["resources"].([]any)[0].(map[string]any)["intervalPeriod"] = map[string]any{"start": startedAt, "duration": "PT30X"}
			}),
			raw(`{"programID": "limited_pause", "eventID": "` + id + `", "clientName": "VEN-A", "resources": [{"resourceName": "` +
				chargerID + `", "intervals": [{"id": 0, "payloads": [{"type": "USAGE", "values": [1]}]}], "pad": "` +
				strings.Repeat("x", 1<<20) + `"}]}`),
		} {
			status, resp := oadrCall("POST", "/reports", venA, body)
			Expect(status).To(Equal(http.StatusBadRequest), "%v: %s", body, resp)
		}
		Expect(counts(ctx)).To(Equal(before))
	})

	It("answers 503 with Retry-After while the database is away, and writes nothing", func(ctx SpecContext) {
		if !testDB.CanStop() {
			Skip("the test database's server is not this process's")
		}
		id := eventOf(started, chargerID)
		before := counts(ctx)
		Expect(testDB.Stop()).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(testDB.Start(ctx)).To(Succeed()) })
		body := report(id, chargerID, halfHours(startedAt.Add(time.Hour)), usage(0.5))
		// A state alone: the one statement that judges and writes it meets the database away.
		stateOnly := report(id, chargerID, nil, state("RUNNING_CURTAILED"))
		for _, tok := range []string{venA, logic} {
			for _, b := range []map[string]any{body, stateOnly} {
				status, resp := oadrCall("POST", "/reports", tok, b)
				Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
				status, _, header, err := testenv.CallFull(apiServer.URL, "POST", oadr.BasePath+"/reports", tok, b, nil)
				Expect(err).NotTo(HaveOccurred())
				Expect(status).To(Equal(http.StatusServiceUnavailable))
				Expect(header.Get("Retry-After")).To(MatchRegexp(`^[1-9][0-9]*$`))
			}
		}
		status, _ := oadrCall("GET", "/vens", venA, nil)
		Expect(status).To(Equal(http.StatusServiceUnavailable))
		Expect(testDB.Start(ctx)).To(Succeed())
		Eventually(func() error { _, err := testDB.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
		Expect(counts(ctx)).To(Equal(before), "nothing was written while it was away")
		Eventually(func(g Gomega) {
			status, resp := oadrCallG(g, "POST", "/reports", venA, body)
			g.Expect(status).To(Equal(http.StatusCreated), "%s", resp)
		}).Should(Succeed())
	})
})
