package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/asseteventstore"
)

// Specs of prod's asset events (docs/api.md, "Asset events: what the devices tell Flexsite")
// against the real API server and a real PostgreSQL: every route answers 200 and keeps its event
// (read back through the store's Latest and GET …/intent), the generic route takes each event type,
// an event about another asset type is a 422, a tariff outside the opening_hours subset a 400,
// another organisation's or an unknown asset a 404, a malformed body a 422, and the database down a
// 503 with Retry-After that keeps nothing.

// assetEventsMPAN makes the i-th MPAN of these specs' series.
func assetEventsMPAN(i int) string { return validMPAN(15000 + i) }

// assetEventRows counts an organisation's kept asset events of one asset.
func assetEventRows(ctx context.Context, ns, assetID string) int {
	var n int
	Expect(database.Pool.QueryRow(ctx, `SELECT count(*) FROM asset_events WHERE organisation = $1 AND asset_id = $2`,
		ns, assetID).Scan(&n)).To(Succeed())
	return n
}

var _ = Describe("Asset events", func() {
	var (
		o                  org
		tok                string
		siteID             string
		chargerID, battery string
		heatPump           string
		store              *asseteventstore.Store
		intentBody         = func(kwh float64) map[string]any {
			return map[string]any{"intent": map[string]any{"energy_required_kwh": kwh, "ready_by": "2026-11-28T07:30:00Z"}}
		}
		eventPath = func(assetID, route string) string { return "/entities/asset/" + assetID + "/event" + route }
	)
	BeforeEach(func(ctx SpecContext) {
		needDatabase()
		o = newOrg(ctx)
		tok = o.token()
		answer := entityInitialise(tok, assetEventsMPAN(CurrentSpecReport().LeafNodeLocation.LineNumber))
		siteID = entitySiteID(answer)
		ids := entityAssetIDs(answer)
		chargerID, battery = ids[0].(string), ids[1].(string)
		heatPump = mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": "hp-" + o.Namespace,
			"type": "heat pump", "site_id": siteID})["id"].(string)
		store = &asseteventstore.Store{Pool: database.Pool}
	})

	It("keeps each named route's event and answers 200 with the event, the latest state read in one query", func(ctx SpecContext) {
		end := "2026-11-28T09:00:00Z"
		for _, step := range []struct {
			route string
			body  map[string]any
			typ   string
		}{
			{"/plug-in", map[string]any{"vehicle": map[string]any{"charging_rate_kw": 7.4},
				"tariff": map[string]any{"off_peak_times": "00:00-05:30, 23:30-24:00", "timezone": "Europe/London", "tariff_type": "dual_rate"}},
				"plug_in"},
			{"/intent", intentBody(20), "intent_update"},
			{"/charge-now", map[string]any{"end_at": end}, "charge_now"},
			{"/charge-now-deleted", map[string]any{}, "charge_now_deleted"},
			{"/charge-now", map[string]any{"end_at": end}, "charge_now"},
			{"/tariff-update", map[string]any{"tariff": map[string]any{"off_peak_times": "00:00-07:00", "timezone": "UTC"}}, "tariff_update"},
			{"/plug-out", map[string]any{}, "plug_out"},
		} {
			answer := mustCall("POST", eventPath(chargerID, step.route), tok, step.body)
			Expect(answer).To(HaveKeyWithValue("asset_id", chargerID))
			Expect(answer).To(HaveKeyWithValue("event_type", step.typ))
			Expect(answer).To(HaveKey("received_at"))
		}
		Expect(assetEventRows(ctx, o.Namespace, chargerID)).To(Equal(7))
		var recordedBy string
		Expect(database.Pool.QueryRow(ctx, `SELECT DISTINCT recorded_by FROM asset_events WHERE organisation = $1`,
			o.Namespace).Scan(&recordedBy)).To(Succeed())
		Expect(recordedBy).NotTo(BeEmpty())

		latest, err := store.Latest(ctx, o.Namespace, []string{chargerID, battery})
		Expect(err).NotTo(HaveOccurred())
		Expect(latest).To(HaveLen(1))
		l := latest[chargerID]
		Expect(l.Plug).To(Equal(asseteventstore.PlugOut))
		Expect(l.ChargeNow).To(Equal(asseteventstore.ChargeNow))
		Expect(l.ChargeNowEnd).To(BeTemporally("==", time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)))
		Expect(l.DeviceState().PluggedOut).To(BeTrue())
		Expect(string(l.Tariff)).To(MatchJSON(`{"off_peak_times": "00:00-07:00", "timezone": "UTC"}`))
		Expect(string(l.Intent)).To(MatchJSON(`{"energy_required_kwh": 20, "ready_by": "2026-11-28T07:30:00Z",
			"may_charge_peak": false, "charging_mode": "maximise_charging_time"}`))
	})

	It("takes each event type on the generic route, with prod's AssetEventRequest", func(ctx SpecContext) {
		for _, body := range []map[string]any{
			{"event_type": "plug_in", "intent": intentBody(12)["intent"], "vehicle": map[string]any{"charging_rate_kw": 11}},
			{"event_type": "intent_update", "intent": map[string]any{"energy_required_kwh": 30, "ready_by": "2026-11-28T06:00:00+00:00",
				"ready_by_local_time": "06:30", "energy_estimated": true, "may_charge_peak": true, "charging_mode": "minimise_charging_time"}},
			{"event_type": "charge_now", "end_at": "2026-11-28T09:00:00+01:00"},
			{"event_type": "charge_now_deleted"},
			{"event_type": "plug_out"},
		} {
			answer := mustCall("POST", eventPath(chargerID, ""), tok, body)
			Expect(answer).To(HaveKeyWithValue("event_type", body["event_type"]))
		}
		Expect(assetEventRows(ctx, o.Namespace, chargerID)).To(Equal(5))
		latest, err := store.Latest(ctx, o.Namespace, []string{chargerID})
		Expect(err).NotTo(HaveOccurred())
		Expect(latest[chargerID].Plug).To(Equal(asseteventstore.PlugOut))
		Expect(latest[chargerID].ChargeNow).To(Equal(asseteventstore.ChargeNowDeleted))
		Expect(latest[chargerID].ChargeNowEnd).To(BeZero())

		By("a charge_now without its end, or an event type prod does not have, is a 422")
		status, resp := call("POST", eventPath(chargerID, ""), tok, map[string]any{"event_type": "charge_now"})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.String()).To(ContainSubstring(`"end_at"`))
		status, resp = call("POST", eventPath(chargerID, ""), tok, map[string]any{"event_type": "tariff_update"})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.String()).To(ContainSubstring(`"event_type"`))
		Expect(assetEventRows(ctx, o.Namespace, chargerID)).To(Equal(5))
	})

	It("answers the latest intent, 404 while there is none", func(ctx SpecContext) {
		status, resp := call("GET", "/entities/asset/"+chargerID+"/intent", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		Expect(resp.Detail()).To(Equal("Intent not found or not authorized"))

		mustCall("POST", eventPath(chargerID, "/intent"), tok, intentBody(10))
		second := map[string]any{"intent": map[string]any{"energy_required_kwh": 25.5, "ready_by": "2026-11-28T08:00:00Z",
			"ready_by_local_time": "08:00", "charging_mode": "minimise_charging_time"}}
		recorded := mustCall("POST", eventPath(chargerID, "/intent"), tok, second)
		// A plug-out after it carries no intent: the latest intent stays the second.
		mustCall("POST", eventPath(chargerID, "/plug-out"), tok, map[string]any{})

		got := mustCall("GET", "/entities/asset/"+chargerID+"/intent", tok, nil)
		intent, err := json.Marshal(got["intent"])
		Expect(err).NotTo(HaveOccurred())
		Expect(string(intent)).To(MatchJSON(`{"energy_required_kwh": 25.5, "ready_by": "2026-11-28T08:00:00Z",
			"ready_by_local_time": "08:00:00", "may_charge_peak": false, "charging_mode": "minimise_charging_time"}`))
		gotAt, err := time.Parse(time.RFC3339Nano, got["received_at"].(string))
		Expect(err).NotTo(HaveOccurred())
		recordedAt, err := time.Parse(time.RFC3339Nano, recorded["received_at"].(string))
		Expect(err).NotTo(HaveOccurred())
		Expect(gotAt).To(BeTemporally("==", recordedAt))

		By("another organisation, and an asset nobody has, are not found")
		other := newOrg(ctx).token()
		status, resp = call("GET", "/entities/asset/"+chargerID+"/intent", other, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("GET", "/entities/asset/"+uuid.NewString()+"/intent", tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
		status, resp = call("GET", "/entities/asset/not-a-uuid/intent", tok, nil)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)

		By("the external-id read beside it still answers")
		Expect(mustCall("GET", "/entities/asset/external-id/charger-"+assetEventsMPAN(CurrentSpecReport().LeafNodeLocation.LineNumber),
			tok, nil)).To(HaveKeyWithValue("id", chargerID))
	})

	It("refuses plug, intent and charge-now events about an asset that is no charger or EV with a 422, and takes its tariff",
		func(ctx SpecContext) {
			for _, asset := range []string{heatPump, battery} {
				for _, step := range []struct {
					route string
					body  map[string]any
				}{
					{"/plug-in", map[string]any{}}, {"/plug-out", map[string]any{}}, {"/intent", intentBody(5)},
					{"/charge-now", map[string]any{"end_at": "2026-11-28T09:00:00Z"}}, {"/charge-now-deleted", map[string]any{}},
					{"", map[string]any{"event_type": "plug_in"}},
				} {
					status, resp := call("POST", eventPath(asset, step.route), tok, step.body)
					Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", step.route, resp)
					item := resp.Map()["detail"].([]any)[0].(map[string]any)
					Expect(item["loc"]).To(Equal([]any{"path", "asset_id"}))
					Expect(item["type"]).To(Equal("asset_type"))
					Expect(item["msg"]).To(ContainSubstring("charger or an electric_vehicle"))
				}
				Expect(assetEventRows(ctx, o.Namespace, asset)).To(BeZero())
			}
			mustCall("POST", eventPath(heatPump, "/tariff-update"), tok,
				map[string]any{"tariff": map[string]any{"off_peak_times": "00:00-07:00", "timezone": "Europe/London"}})
			Expect(assetEventRows(ctx, o.Namespace, heatPump)).To(Equal(1))
		})

	It("refuses a tariff outside prod's opening_hours subset, or with an unknown zone, with a 400 and keeps nothing",
		func(ctx SpecContext) {
			for _, tariff := range []map[string]any{
				{"off_peak_times": "Mo-Fr 00:00-07:00", "timezone": "Europe/London"},
				{"off_peak_times": "25:00-26:00", "timezone": "Europe/London"},
				{"off_peak_times": "07:00-00:00", "timezone": "Europe/London"},
				{"off_peak_times": "00:00-00:60", "timezone": "Europe/London"},
				{"off_peak_times": "00:00-07:00; Sa 00:00-24:00", "timezone": "Europe/London"},
				{"off_peak_times": "00:00-07:00", "timezone": "Europe/Narnia"},
			} {
				for _, req := range []struct {
					route string
					body  map[string]any
				}{
					{"/tariff-update", map[string]any{"tariff": tariff}},
					{"/plug-in", map[string]any{"tariff": tariff}},
					{"", map[string]any{"event_type": "plug_in", "tariff": tariff}},
				} {
					status, resp := call("POST", eventPath(chargerID, req.route), tok, req.body)
					Expect(status).To(Equal(http.StatusBadRequest), "%v %s: %s", tariff, req.route, resp)
					Expect(resp.Detail()).To(HavePrefix("Invalid tariff "))
				}
			}
			Expect(assetEventRows(ctx, o.Namespace, chargerID)).To(BeZero())
		})

	It("answers 404 for another organisation's asset and an unknown one, and 422 for a malformed body", func(ctx SpecContext) {
		other := newOrg(ctx).token()
		for _, route := range []string{"", "/plug-in", "/plug-out", "/intent", "/charge-now", "/charge-now-deleted", "/tariff-update"} {
			body := map[string]any{"event_type": "plug_in", "intent": intentBody(1)["intent"], "end_at": "2026-11-28T09:00:00Z",
				"tariff": map[string]any{"off_peak_times": "00:00-07:00", "timezone": "UTC"}}
			status, resp := call("POST", eventPath(chargerID, route), other, body)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", route, resp)
			Expect(resp.String()).NotTo(ContainSubstring(chargerID))
			status, resp = call("POST", eventPath(uuid.NewString(), route), tok, body)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", route, resp)
		}

		for _, bad := range []struct {
			route string
			body  any
			loc   []any
		}{
			{"/plug-in", raw("{not json"), nil},
			{"/plug-in", []any{1}, nil},
			{"/plug-out", nil, nil},
			{"", map[string]any{}, []any{"body", "event_type"}},
			{"", map[string]any{"event_type": "unplugged"}, []any{"body", "event_type"}},
			{"/intent", map[string]any{}, []any{"body", "intent"}},
			{"/intent", map[string]any{"intent": map[string]any{"ready_by": "2026-11-28T07:30:00Z"}},
				[]any{"body", "intent", "energy_required_kwh"}},
			{"/intent", map[string]any{"intent": map[string]any{"energy_required_kwh": 5}}, []any{"body", "intent", "ready_by"}},
			{"/intent", map[string]any{"intent": map[string]any{"energy_required_kwh": "five", "ready_by": "2026-11-28T07:30:00Z"}},
				[]any{"body", "intent", "energy_required_kwh"}},
			{"/intent", map[string]any{"intent": map[string]any{"energy_required_kwh": 5, "ready_by": "tomorrow"}},
				[]any{"body", "intent", "ready_by"}},
			{"/intent", map[string]any{"intent": map[string]any{"energy_required_kwh": 5, "ready_by": "2026-11-28T07:30:00"}},
				[]any{"body", "intent", "ready_by"}},
			{"/intent", map[string]any{"intent": map[string]any{"energy_required_kwh": 5, "ready_by": "2026-11-28T07:30:00Z",
				"ready_by_local_time": "7.30pm"}}, []any{"body", "intent", "ready_by_local_time"}},
			{"/intent", map[string]any{"intent": map[string]any{"energy_required_kwh": 5, "ready_by": "2026-11-28T07:30:00Z",
				"charging_mode": "as_fast_as_possible"}}, []any{"body", "intent", "charging_mode"}},
			{"/intent", map[string]any{"intent": map[string]any{"energy_required_kwh": 5, "ready_by": "2026-11-28T07:30:00Z",
				"may_charge_peak": "yes"}}, []any{"body", "intent", "may_charge_peak"}},
			{"/plug-in", map[string]any{"vehicle": map[string]any{}}, []any{"body", "vehicle", "charging_rate_kw"}},
			{"/charge-now", map[string]any{}, []any{"body", "end_at"}},
			{"/charge-now", map[string]any{"end_at": "2026-11-28T09:00:00"}, []any{"body", "end_at"}},
			{"/tariff-update", map[string]any{}, []any{"body", "tariff"}},
			{"/tariff-update", map[string]any{"tariff": map[string]any{"timezone": "UTC"}}, []any{"body", "tariff", "off_peak_times"}},
			{"/tariff-update", map[string]any{"tariff": map[string]any{"off_peak_times": "00:00-07:00", "timezone": "UTC",
				"tariff_type": "cheap"}}, []any{"body", "tariff", "tariff_type"}},
		} {
			status, resp := call("POST", eventPath(chargerID, bad.route), tok, bad.body)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s %v: %s", bad.route, bad.body, resp)
			if bad.loc != nil {
				Expect(resp.Detail()).To(ContainElement(HaveKeyWithValue("loc", bad.loc)), "%s %v", bad.route, bad.body)
			}
		}
		status, resp := call("POST", eventPath("not-a-uuid", "/plug-in"), tok, map[string]any{})
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
		Expect(resp.Detail()).To(ContainElement(HaveKeyWithValue("loc", []any{"path", "asset_id"})))
		Expect(assetEventRows(ctx, o.Namespace, chargerID)).To(BeZero())
	})

	It("answers 503 with Retry-After while the database is down, keeping nothing, and takes events again once it is back",
		Serial, func(ctx SpecContext) {
			if !database.CanStop() {
				Skip("the test database is not this process's server ($FLEXSITE_TEST_DATABASE_URL)")
			}
			Expect(database.Stop()).To(Succeed())
			stopped := true
			DeferCleanup(func(ctx SpecContext) {
				if stopped {
					Expect(database.Start(ctx)).To(Succeed())
				}
			})
			status, header, resp := callWithHeader("POST", eventPath(chargerID, "/intent"), tok, intentBody(9))
			Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
			Expect(header.Get("Retry-After")).To(Equal("5"))
			Expect(resp.Detail()).To(ContainSubstring("nothing was stored"))
			status, header, resp = callWithHeader("GET", "/entities/asset/"+chargerID+"/intent", tok, nil)
			Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
			Expect(header.Get("Retry-After")).To(Equal("5"))

			Expect(database.Start(ctx)).To(Succeed())
			stopped = false
			Eventually(func() error { _, err := database.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
			Expect(assetEventRows(ctx, o.Namespace, chargerID)).To(BeZero())
			Eventually(func(g Gomega) {
				status, resp := call("POST", eventPath(chargerID, "/intent"), tok, intentBody(9))
				g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			}).Should(Succeed())
			Expect(assetEventRows(ctx, o.Namespace, chargerID)).To(Equal(1))
			Expect(mustCall("GET", "/entities/asset/"+chargerID+"/intent", tok, nil)["intent"]).
				To(HaveKeyWithValue("energy_required_kwh", 9.0))
		})
})
