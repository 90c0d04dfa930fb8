package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/santhosh-tekuri/jsonschema/v6"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/dispatch"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/restapi/apidocs"
	"github.com/flexsite/flexsite/internal/testenv"
)

// The dispatch status callback (docs/api.md, "Dispatch status callbacks")
// and the dispatch counts of the flex event answers. The FlexEvent controller's issuing is
// another part's: the dispatches here are issued straight into the database
// (dispatchstore.Issue), for a site and assets made through the API.
var _ = Describe("Dispatch callbacks", Ordered, func() {
	const mpan = "1200000000011"
	var (
		o, other                org
		tok, otherTok, readOnly string
		siteID, chargerID       string
		batteryID, otherAssetID string
		flexEventID             string
		store                   *dispatchstore.Store
		start                   time.Time
	)
	callbackPath := func(asset string, id any) string {
		return "/entities/asset/" + asset + "/callback/" + fmt.Sprint(id)
	}
	// report is a report timestamped now (an EXECUTED one only of a window that has started).
	// report is a report timestamped by the REST API's clock (the suite's, which tests move):
	// a report is judged against that clock (dispatch.CheckReportTime), not the machine's.
	report := func(status string) map[string]any {
		return map[string]any{"timestamp": clock.Load().UTC().Format(time.RFC3339), "status": status}
	}
	// issue issues a dispatch of flexEvent to asset of org ns, and answers its event id.
	issue := func(ctx SpecContext, ns, flexEvent, site, asset string, skips ...dispatchstore.Skip) string {
		GinkgoHelper()
		_, err := store.Issue(ctx, ns, "https://flexsite.test", []dispatchstore.Dispatch{{FlexEvent: flexEvent,
			SiteID: site, AssetID: asset, MarketID: "limited_pause", LevelKW: 0, From: start, To: start.Add(time.Hour),
			EventTimestamp: start.Add(-time.Hour)}}, skips, time.Now())
		Expect(err).NotTo(HaveOccurred())
		return dispatch.EventID(ns, flexEvent, asset).String()
	}
	history := func(ctx SpecContext, ns, id string) (status string, changes int) {
		GinkgoHelper()
		Expect(testDB.Pool.QueryRow(ctx, `SELECT d.status, (SELECT count(*) FROM dispatch_status_changes c
			WHERE c.organisation = d.organisation AND c.event_id = d.event_id) FROM dispatches d
			WHERE d.organisation = $1 AND d.event_id = $2`, ns, id).Scan(&status, &changes)).To(Succeed())
		return status, changes
	}
	statusOf := func(ctx SpecContext, ns, id string) string {
		GinkgoHelper()
		status, _ := history(ctx, ns, id)
		return status
	}

	BeforeAll(func(ctx SpecContext) {
		needDatabase()
		store = &dispatchstore.Store{Pool: testDB.Pool}
		o = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		other = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite, flexv1.RoleFlexEventsWrite)
		tok, otherTok = o.token(), other.token()
		ro := org{Namespace: o.Namespace, Username: o.Username + "-read", Password: o.Password + "-read"}
		Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: ro.Namespace,
			Username: ro.Username, Password: ro.Password, Roles: []flexv1.Role{flexv1.RoleEntityRead}})).To(Succeed())
		readOnly = ro.token()

		siteID = onboardedSite(tok, mpan)
		chargerID = mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		batteryID = mustCall("GET", "/entities/asset/external-id/battery-"+mpan, tok, nil)["id"].(string)
		otherSite := onboardedSite(otherTok, mpan)
		otherAssetID = mustCall("GET", "/entities/asset/external-id/charger-"+mpan, otherTok, nil)["id"].(string)
		Expect(otherSite).NotTo(BeEmpty())

		// A flex event of the site that has started (so that the site's flex events list it).
		start = time.Now().UTC().Truncate(30 * time.Minute).Add(-time.Hour)
		status, created := call("POST", "/flex-events", tok, map[string]any{"proposition": "limited_pause",
			"start_at": start.Format(time.RFC3339), "end_at": start.Add(time.Hour).Format(time.RFC3339),
			"direction": "turn_down", "rate_pence_per_kwh": 25, "site_ids": []any{siteID}})
		Expect(status).To(Equal(http.StatusCreated), "%s", created)
		flexEventID = created.Map()["id"].(string)
		Expect(created.Map()["dispatches"]).To(HaveKeyWithValue("issued", 0.0))
	})

	It("walks the state machine: forward 200, the same again 200 unchanged, back or after a final status 409", func(ctx SpecContext) {
		executed := issue(ctx, o.Namespace, "sm-executed", siteID, chargerID)
		failed := issue(ctx, o.Namespace, "sm-failed", siteID, chargerID)
		rejected := issue(ctx, o.Namespace, "sm-rejected", siteID, chargerID)
		skipped := issue(ctx, o.Namespace, "sm-skip-forward", siteID, chargerID)
		for _, step := range []struct {
			id, status string
			want       int
			changed    bool
		}{
			{executed, "ACCEPTED", http.StatusOK, true},
			{executed, "ACCEPTED", http.StatusOK, false},
			{executed, "RECEIVED", http.StatusConflict, false},
			{executed, "EXECUTED", http.StatusOK, true},
			{executed, "EXECUTED", http.StatusOK, false},
			{executed, "FAILED", http.StatusConflict, false},
			{executed, "ACCEPTED", http.StatusConflict, false},
			{failed, "RECEIVED", http.StatusOK, true},
			{failed, "ACCEPTED", http.StatusOK, true},
			{failed, "REJECTED", http.StatusConflict, false},
			{failed, "FAILED", http.StatusOK, true},
			{failed, "EXECUTED", http.StatusConflict, false},
			{rejected, "RECEIVED", http.StatusOK, true},
			{rejected, "REJECTED", http.StatusOK, true},
			{rejected, "ACCEPTED", http.StatusConflict, false},
			{rejected, "REJECTED", http.StatusOK, false},
			{skipped, "EXECUTED", http.StatusOK, true},
		} {
			before, changes := history(ctx, o.Namespace, step.id)
			status, resp := call("POST", callbackPath(chargerID, step.id), tok, report(step.status))
			Expect(status).To(Equal(step.want), "%s after %s: %s", step.status, before, resp)
			after, changesAfter := history(ctx, o.Namespace, step.id)
			if step.want != http.StatusOK {
				Expect(resp.Detail()).To(BeAssignableToTypeOf(""), "%s", resp)
				Expect([]any{after, changesAfter}).To(Equal([]any{before, changes}), "a refused report changes nothing")
				continue
			}
			Expect(resp.Map()).To(Equal(map[string]any{"event_id": step.id, "asset_id": chargerID,
				"status": step.status, "changed": step.changed}))
			Expect(after).To(Equal(strings.ToLower(step.status)))
			if step.changed {
				Expect(changesAfter).To(Equal(changes + 1))
			} else {
				Expect(changesAfter).To(Equal(changes), "the same status again writes nothing")
			}
		}
		var by string
		Expect(testDB.Pool.QueryRow(ctx, `SELECT recorded_by FROM dispatch_status_changes WHERE organisation = $1
			AND event_id = $2 ORDER BY id DESC LIMIT 1`, o.Namespace, executed).Scan(&by)).To(Succeed())
		Expect(by).To(Equal(o.Username), "who reported is kept")
	})

	It("judges a report's timestamp and EXECUTED against the dispatch's window, with a clock's skew", func(ctx SpecContext) {
		// A dispatch whose window starts tomorrow (issue 47: it could be reported EXECUTED
		// now, or timestamped year 1, and the household's page then said it "was paused").
		ahead := time.Now().UTC().Truncate(30 * time.Minute).Add(24 * time.Hour)
		_, err := store.Issue(ctx, o.Namespace, "https://flexsite.test", []dispatchstore.Dispatch{{FlexEvent: "window-ahead",
			SiteID: siteID, AssetID: chargerID, MarketID: "limited_pause", LevelKW: 0, From: ahead, To: ahead.Add(time.Hour),
			EventTimestamp: time.Now()}}, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
		future := dispatch.EventID(o.Namespace, "window-ahead", chargerID).String()
		started := issue(ctx, o.Namespace, "window-started", siteID, chargerID)
		at := func(status, timestamp string) map[string]any {
			return map[string]any{"timestamp": timestamp, "status": status}
		}
		stamp := func(t time.Time) string { return t.UTC().Format(time.RFC3339) }

		By("a timestamp out of the supported range, or later than now beyond the skew: 422 at the field")
		for _, bad := range []struct{ timestamp, typ string }{
			{"0001-01-01T00:00:00Z", "greater_than_equal"},
			{"1899-12-31T23:59:59Z", "greater_than_equal"},
			{"0000-01-01T00:00:00Z", "datetime_parsing"},
			{"9999-12-31T23:59:59-01:00", "datetime_parsing"},
			{"-infinity", "datetime_parsing"},
			{stamp(time.Now().Add(dispatch.MaxReportSkew + time.Hour)), "value_error"},
			{"9999-12-31T23:59:59Z", "value_error"},
		} {
			for _, id := range []string{future, started} {
				for _, st := range []string{"ACCEPTED", "EXECUTED"} {
					status, resp := call("POST", callbackPath(chargerID, id), tok, at(st, bad.timestamp))
					expectValidationItem(status, resp, []any{"body", "timestamp"}, bad.typ)
				}
			}
		}
		Expect(statusOf(ctx, o.Namespace, future)).To(Equal("requested"))
		Expect(statusOf(ctx, o.Namespace, started)).To(Equal("requested"))

		By("EXECUTED of a window that starts tomorrow: 409, as the state machine's refusals; ACCEPTED is fine")
		status, resp := call("POST", callbackPath(chargerID, future), tok, report("EXECUTED"))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(resp.Detail()).To(ContainSubstring("window has not started"))
		mustCall("POST", callbackPath(chargerID, future), tok, report("ACCEPTED"))
		status, resp = call("POST", callbackPath(chargerID, future), tok, at("EXECUTED", stamp(ahead.Add(30*time.Minute))))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "timestamped in the window, tomorrow: in the future, %s", resp)
		Expect(statusOf(ctx, o.Namespace, future)).To(Equal("accepted"))

		By("EXECUTED of a started window, timestamped before it began: 409; timestamped now (or a skew ahead): 200")
		status, resp = call("POST", callbackPath(chargerID, started), tok, at("EXECUTED", "1900-01-01T00:00:00Z"))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		status, resp = call("POST", callbackPath(chargerID, started), tok, at("EXECUTED", stamp(start.Add(-time.Hour))))
		Expect(status).To(Equal(http.StatusConflict), "%s", resp)
		Expect(statusOf(ctx, o.Namespace, started)).To(Equal("requested"))
		status, resp = call("POST", callbackPath(chargerID, started), tok,
			at("EXECUTED", stamp(clock.Load().Add(dispatch.MaxReportSkew-time.Minute))))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(statusOf(ctx, o.Namespace, started)).To(Equal("executed"))
	})

	It("refuses a report after the dispatch was cancelled with 409", func(ctx SpecContext) {
		id := issue(ctx, o.Namespace, "cancelled-event", siteID, chargerID)
		mustCall("POST", callbackPath(chargerID, id), tok, report("RECEIVED"))
		n, err := store.Cancel(ctx, o.Namespace, "cancelled-event", time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(n).To(Equal(1))
		for _, st := range []string{"ACCEPTED", "EXECUTED", "RECEIVED"} {
			status, resp := call("POST", callbackPath(chargerID, id), tok, report(st))
			Expect(status).To(Equal(http.StatusConflict), "%s: %s", st, resp)
		}
		Expect(statusOf(ctx, o.Namespace, id)).To(Equal("cancelled"))
	})

	It("takes the asset's external id with asset_id_is_external=true", func(ctx SpecContext) {
		id := issue(ctx, o.Namespace, "external-event", siteID, chargerID)
		status, resp := call("POST", callbackPath("charger-"+mpan, id)+"?asset_id_is_external=true", tok, report("ACCEPTED"))
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		Expect(resp.Map()).To(HaveKeyWithValue("asset_id", chargerID))
		status, resp = call("POST", callbackPath("no-such-external-id", id)+"?asset_id_is_external=true", tok, report("EXECUTED"))
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("POST", callbackPath(chargerID, id)+"?asset_id_is_external=maybe", tok, report("EXECUTED"))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(statusOf(ctx, o.Namespace, id)).To(Equal("accepted"))
	})

	It("answers 404 for another organisation's asset or event, an unknown event and a malformed event id", func(ctx SpecContext) {
		ours := issue(ctx, o.Namespace, "scoped-event", siteID, chargerID)
		theirs := issue(ctx, other.Namespace, "scoped-event", "their-site", otherAssetID)
		for name, c := range map[string]struct{ token, path string }{
			"another organisation reporting on our dispatch": {otherTok, callbackPath(chargerID, ours)},
			"our report naming their asset and event":        {tok, callbackPath(otherAssetID, theirs)},
			"our asset with their event id":                  {tok, callbackPath(chargerID, theirs)},
			"another of our assets with the event id":        {tok, callbackPath(batteryID, ours)},
			"an unknown event":                               {tok, callbackPath(chargerID, identity.NewID())},
			"an event id that is no UUID":                    {tok, callbackPath(chargerID, "not-a-uuid")},
			"an unknown asset":                               {tok, callbackPath(identity.NewID(), ours)},
		} {
			status, resp := call("POST", c.path, c.token, report("ACCEPTED"))
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", name, resp)
		}
		Expect(statusOf(ctx, o.Namespace, ours)).To(Equal("requested"))
		Expect(statusOf(ctx, other.Namespace, theirs)).To(Equal("requested"))
		By("a malformed asset id is the path's 422, as on every asset route")
		status, resp := call("POST", callbackPath("not-a-uuid", ours), tok, report("ACCEPTED"))
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		By("entity_read alone may not report")
		status, resp = call("POST", callbackPath(chargerID, ours), readOnly, report("ACCEPTED"))
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		Expect(statusOf(ctx, o.Namespace, ours)).To(Equal("requested"))
	})

	DescribeTable("refuses a bad body with a 422 naming the field",
		func(ctx SpecContext, body any, loc []any) {
			id := issue(ctx, o.Namespace, "bad-bodies", siteID, chargerID)
			status, resp := call("POST", callbackPath(chargerID, id), tok, body)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			detail, ok := resp.Detail().([]any)
			Expect(ok).To(BeTrue(), "%s", resp)
			named := false
			for _, item := range detail {
				got, _ := item.(map[string]any)["loc"].([]any)
				named = named || (len(got) >= len(loc) && reflect.DeepEqual(got[:len(loc)], loc))
			}
			Expect(named).To(BeTrue(), "no item at %v: %s", loc, resp)
			Expect(statusOf(ctx, o.Namespace, id)).To(Equal("requested"))
		},
		Entry("no timestamp", map[string]any{"status": "ACCEPTED"}, []any{"body", "timestamp"}),
		Entry("no status", map[string]any{"timestamp": "2026-11-27T12:00:00Z"}, []any{"body", "status"}),
		Entry("a status in lower case", map[string]any{"timestamp": "2026-11-27T12:00:00Z", "status": "accepted"}, []any{"body", "status"}),
		Entry("a status prod does not report", map[string]any{"timestamp": "2026-11-27T12:00:00Z", "status": "CANCELLED"}, []any{"body", "status"}),
		Entry("a status that is no string", map[string]any{"timestamp": "2026-11-27T12:00:00Z", "status": 3}, []any{"body", "status"}),
		Entry("a timestamp that is none", map[string]any{"timestamp": "yesterday", "status": "ACCEPTED"}, []any{"body", "timestamp"}),
		Entry("a timestamp without a zone", map[string]any{"timestamp": "2026-11-27T12:00:00", "status": "ACCEPTED"}, []any{"body", "timestamp"}),
		Entry("a timestamp that is no string", map[string]any{"timestamp": 1764244800, "status": "ACCEPTED"}, []any{"body", "timestamp"}),
		Entry("malformed JSON", raw(`{"timestamp": `), []any{"body"}),
		Entry("not an object", []any{"ACCEPTED"}, []any{"body"}),
	)

	It("counts the dispatches in GET /flex-events/{id}, GET /flex-events and the site's flex events", func(ctx SpecContext) {
		charger := issue(ctx, o.Namespace, flexEventID, siteID, chargerID,
			dispatchstore.Skip{FlexEvent: flexEventID, SiteID: siteID, AssetID: "plugged-out-asset", Reason: dispatch.NotPluggedIn})
		issue(ctx, o.Namespace, flexEventID, siteID, batteryID)
		mustCall("POST", callbackPath(chargerID, charger), tok, report("ACCEPTED"))
		mustCall("POST", callbackPath(chargerID, charger), tok, report("EXECUTED"))
		want := map[string]any{"issued": 2.0, "requested": 1.0, "received": 0.0, "accepted": 0.0, "rejected": 0.0,
			"executed": 1.0, "failed": 0.0, "cancelled": 0.0, "skipped": map[string]any{"not_plugged_in": 1.0}}
		Expect(mustCall("GET", "/flex-events/"+flexEventID, tok, nil)["dispatches"]).To(Equal(want))
		var listed map[string]any
		for _, ev := range mustCall("GET", "/flex-events", tok, nil)["events"].([]any) {
			if ev.(map[string]any)["id"] == flexEventID {
				listed = ev.(map[string]any)
			}
		}
		Expect(listed).To(HaveKeyWithValue("dispatches", want))
		Eventually(func(g Gomega) {
			status, resp := call("GET", "/entities/site/"+siteID+"/flex-events", tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			var found map[string]any
			for _, ev := range resp.MapG(g)["events"].([]any) {
				if ev.(map[string]any)["id"] == flexEventID {
					found = ev.(map[string]any)
				}
			}
			g.Expect(found).To(HaveKeyWithValue("dispatches", want), "%s", resp)
		}).Should(Succeed())
		By("another organisation's events count nothing of ours")
		for _, ev := range mustCall("GET", "/flex-events", otherTok, nil)["events"].([]any) {
			Expect(ev.(map[string]any)["dispatches"]).To(HaveKeyWithValue("issued", 0.0))
		}
	})

	It("answers the example DispatchEvent to an organisation's token (401 without), valid against prod's DispatchEvent schema", func() {
		status, body, err := testenv.Call(apiServer.URL, "GET", "/examples/dispatch-event", "", nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusUnauthorized), "%s", body)
		status, body, err = testenv.Call(apiServer.URL, "GET", "/examples/dispatch-event", readOnly, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(apidocs.Document()))
		Expect(err).NotTo(HaveOccurred())
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft2020)
		c.AssertFormat()
		Expect(c.AddResource("https://flexsite.invalid/openapi.json", doc)).To(Succeed())
		schema, err := c.Compile("https://flexsite.invalid/openapi.json#/components/schemas/DispatchEvent")
		Expect(err).NotTo(HaveOccurred())
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		Expect(schema.Validate(inst)).To(Succeed())
		var ev dispatch.Event
		Expect(json.Unmarshal(body, &ev)).To(Succeed())
		Expect(ev.UpdateStatusCallback).To(HavePrefix(apiServer.URL + "/entities/asset/" + ev.AssetID + "/callback/" + ev.EventID))
		Expect(ev.FromTime < ev.ToTime).To(BeTrue())
	})

	It("answers 503 with Retry-After while the database is away, records nothing, and takes the report once back", func(ctx SpecContext) {
		if !testDB.CanStop() {
			Skip("the test database's server is not this process's")
		}
		id := issue(ctx, o.Namespace, "outage-event", siteID, chargerID)
		Expect(testDB.Stop()).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(testDB.Start(ctx)).To(Succeed()) })
		for _, path := range []string{callbackPath(chargerID, id), callbackPath("charger-"+mpan, id) + "?asset_id_is_external=true"} {
			status, header, resp := callWithHeader("POST", path, tok, report("ACCEPTED"))
			Expect(status).To(Equal(http.StatusServiceUnavailable), "%s: %s", path, resp)
			Expect(header.Get("Retry-After")).To(MatchRegexp(`^[1-9][0-9]*$`))
			Expect(resp.Detail()).To(ContainSubstring("unavailable"))
		}
		status, header, resp := callWithHeader("GET", "/flex-events/"+flexEventID, tok, nil)
		Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
		Expect(header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(testDB.Start(ctx)).To(Succeed())
		// The suite's own pool drops the connections the restart ended, one failed query each.
		Eventually(func() error { _, err := testDB.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
		Expect(statusOf(ctx, o.Namespace, id)).To(Equal("requested"), "nothing was recorded while it was away")
		Eventually(func() int {
			status, _ := call("POST", callbackPath(chargerID, id), tok, report("ACCEPTED"))
			return status
		}).Should(Equal(http.StatusOK))
		status2, changes := history(ctx, o.Namespace, id)
		Expect([]any{status2, changes}).To(Equal([]any{"accepted", 2}), "requested, then accepted once")
	})
})
