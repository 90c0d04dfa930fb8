package server_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/db"
)

// Specs of POST /data/readings against the real API server and a real PostgreSQL: each
// reading accepted or rejected with its reason, the accepted stored (organisation, site and
// asset), a reading sent again replacing the earlier one, gzip, the size limit, malformed
// bodies storing nothing, and the database taken away and brought back.

// readingsMPAN makes the i-th MPAN of these specs' series.
func readingsMPAN(i int) string { return validMPAN(9100 + i) }

// reading is one ReadingDataPoint.
func reading(assetID, label, start, end string, value any) map[string]any {
	return map[string]any{"asset_id": assetID, "label": label, "start_timestamp": start, "end_timestamp": end, "value": value}
}

// readingsBody is a ReadingsDataPoints body.
func readingsBody(rs ...map[string]any) []byte {
	data, err := json.Marshal(map[string]any{"readings": rs})
	Expect(err).NotTo(HaveOccurred())
	return data
}

// postReadings sends a body (as it is) to POST /data/readings with extra headers.
func postReadings(g Gomega, tok string, body []byte, headers map[string]string) (int, http.Header, response) {
	req, err := http.NewRequest("POST", apiServer.URL+"/data/readings", bytes.NewReader(body))
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return resp.StatusCode, resp.Header, data
}

// responsesOf are the answer's per-reading responses.
func responsesOf(r response) []map[string]any {
	var body struct {
		Responses []map[string]any `json:"responses"`
	}
	ExpectWithOffset(1, json.Unmarshal(r, &body)).To(Succeed(), "%s", r)
	return body.Responses
}

func gzipped(data []byte) []byte {
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	_, err := zw.Write(data)
	Expect(err).NotTo(HaveOccurred())
	Expect(zw.Close()).To(Succeed())
	return buf.Bytes()
}

// storedReading is one row of the readings table.
type storedReading struct {
	SiteID, AssetID, Label, Partition string
	Start, End                        time.Time
	Value                             float64
}

// storedReadings are the organisation's stored readings, by asset, label and start.
func storedReadings(ctx context.Context, ns string) []storedReading {
	rows, err := database.Pool.Query(ctx, `SELECT site_id, asset_id, label, tableoid::regclass::text, start_at, end_at, value
		FROM readings WHERE organisation = $1 ORDER BY asset_id, label, start_at, end_at`, ns)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	defer rows.Close()
	var out []storedReading
	for rows.Next() {
		var r storedReading
		ExpectWithOffset(1, rows.Scan(&r.SiteID, &r.AssetID, &r.Label, &r.Partition, &r.Start, &r.End, &r.Value)).To(Succeed())
		out = append(out, r)
	}
	ExpectWithOffset(1, rows.Err()).NotTo(HaveOccurred())
	return out
}

var _ = Describe("POST /data/readings", func() {
	var (
		o                       org
		tok                     string
		siteID                  string
		chargerID, batteryID    string
		t0, t30, t60, t90, t120 string
	)
	BeforeEach(func(ctx SpecContext) {
		needDatabase()
		o = newOrg(ctx)
		tok = o.token()
		answer := entityInitialise(tok, readingsMPAN(CurrentSpecReport().LeafNodeLocation.LineNumber))
		siteID = entitySiteID(answer)
		ids := entityAssetIDs(answer)
		chargerID, batteryID = ids[0].(string), ids[1].(string)
		t0, t30, t60, t90, t120 = "2026-04-14T17:00:00Z", "2026-04-14T17:30:00Z", "2026-04-14T18:00:00+00:00",
			"2026-04-14T19:30:00+01:00", "2026-04-14T19:00:00Z"
	})

	It("accepts or rejects each reading with its reason, and stores the accepted ones with their organisation, site and asset",
		func(ctx SpecContext) {
			notFinite := `{"asset_id": "` + batteryID + `", "label": "battery_inverter_import_kw", "start_timestamp": "` + t0 +
				`", "end_timestamp": "` + t30 + `", "value": 1e999}`
			body := readingsBody(
				reading(chargerID, "boundary_import_kw", t0, t30, -1.5),            // export: may be negative
				reading(chargerID, "solar_power_kw", t0, t30, -0.2),                // wrong sign
				reading(chargerID, "charger_consumption_energy_kwh", t30, t0, 1.1), // end before start
				reading(uuid.NewString(), "boundary_import_kw", t0, t30, 1),        // unknown asset
				reading("not-a-uuid", "boundary_import_kw", t0, t30, 1),            // not an asset id at all
				reading(batteryID, "battery_state_of_charge_pct", t30, t30, 100.5), // out of range
				reading(batteryID, "gas_m3", t0, t30, 1),                           // unknown label
				reading(batteryID, "battery_state_of_charge_pct", t60, t60, 80),    // a state: start = end
				reading(chargerID, "charger_lifetime_consumption_energy_kwh", t60, t90, 1234.5),
				reading(chargerID, "boundary_import_kw", "2126-04-14T17:00:00Z", "2126-04-14T17:30:00Z", 1), // a century ahead
			)
			// 1e999 is a JSON number no double holds: not finite, rejected alone.
			body = bytes.Replace(body, []byte(`]}`), []byte(`,`+notFinite+`]}`), 1)
			status, _, resp := postReadings(Default, tok, body, nil)
			Expect(status).To(Equal(http.StatusOK), "%s", resp)
			rs := responsesOf(resp)
			Expect(rs).To(HaveLen(11))
			Expect(rs[0]).To(Equal(map[string]any{"asset_id": chargerID, "label": "boundary_import_kw",
				"start_timestamp": t0, "end_timestamp": t30, "accepted": true}))
			errs := make([]any, len(rs))
			for i, r := range rs {
				errs[i] = r["error"]
				Expect(r["accepted"]).To(Equal(r["error"] == nil), "%v", r)
			}
			Expect(errs).To(Equal([]any{nil, "solar_power_kw must not be negative", "the reading's end is before its start",
				"Asset not found or not authorized", "Asset not found or not authorized",
				"battery_state_of_charge_pct must be between 0 and 100", `unknown label "gas_m3"`, nil, nil,
				"the reading starts more than 31 days in the future", "the value is not a finite number"}))
			Expect(rs[4]["asset_id"]).To(Equal("not-a-uuid"), "the fields are answered as sent")
			Expect(rs[8]["end_timestamp"]).To(Equal(t90))

			By("storing the three accepted readings, in the month's partition, with the site and asset")
			start := func(s string) time.Time {
				t, err := time.Parse(time.RFC3339, s)
				Expect(err).NotTo(HaveOccurred())
				return t
			}
			stored := storedReadings(ctx, o.Namespace)
			Expect(stored).To(HaveLen(3))
			want := []storedReading{
				{siteID, chargerID, "boundary_import_kw", "readings_2026_04", start(t0), start(t30), -1.5},
				{siteID, chargerID, "charger_lifetime_consumption_energy_kwh", "readings_2026_04", start(t60), start(t90), 1234.5},
				{siteID, batteryID, "battery_state_of_charge_pct", "readings_2026_04", start(t60), start(t60), 80},
			}
			for _, w := range want {
				Expect(stored).To(ContainElement(WithTransform(func(r storedReading) storedReading {
					r.Start, r.End = r.Start.UTC(), r.End.UTC()
					return r
				}, Equal(storedReading{w.SiteID, w.AssetID, w.Label, w.Partition, w.Start.UTC(), w.End.UTC(), w.Value}))))
			}
		})

	// The minting scenario of the money review: readings of 1e6 kW on the days before an event
	// and 0 on its day made any credit. A reading above what the site can import or export is
	// refused one by one with its reason: its assets' ratings + 50 % (7.4 + 5 kW: 18.6 kW), the
	// whole home's at most a 100 A supply (23 kW); and so is one older than the kept span.
	It("rejects each reading above the site's plausible power, or older than three years, with its reason", func(ctx SpecContext) {
		old := time.Now().AddDate(-3, 0, -2).UTC().Truncate(time.Hour)
		body := readingsBody(
			reading(chargerID, "boundary_import_kw", t0, t30, 1e6),
			reading(batteryID, "battery_inverter_import_kw", t0, t30, 1e6),
			reading(chargerID, "boundary_import_kw", t30, t60, 20),              // the whole home: above its assets, within 23 kW
			reading(batteryID, "battery_inverter_import_kw", t30, t60, -18.6),   // at the bound
			reading(batteryID, "battery_inverter_import_kw", t60, t120, -18.7),  // above it
			reading(chargerID, "charger_consumption_energy_kwh", t0, t30, 10),   // 10 kWh in 30 minutes: 20 kW
			reading(chargerID, "charger_consumption_energy_kwh", t30, t60, 9.3), // 18.6 kW
			reading(chargerID, "boundary_import_kw", old.Format(time.RFC3339), old.Add(30*time.Minute).Format(time.RFC3339), 1),
		)
		status, _, resp := postReadings(Default, tok, body, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		rs := responsesOf(resp)
		errs := make([]any, len(rs))
		for i, r := range rs {
			errs[i] = r["error"]
			Expect(r["accepted"]).To(Equal(r["error"] == nil), "%v", r)
		}
		Expect(errs).To(Equal([]any{
			"boundary_import_kw: 1e+06 kW is above the 23 kW a UK domestic supply (100 A at 230 V) carries",
			"battery_inverter_import_kw: 1e+06 kW is above the site's plausible 18.6 kW (its assets' power ratings + 50 %)",
			nil, nil,
			"battery_inverter_import_kw: 18.7 kW is above the site's plausible 18.6 kW (its assets' power ratings + 50 %)",
			"charger_consumption_energy_kwh: 20 kW is above the site's plausible 18.6 kW (its assets' power ratings + 50 %)",
			nil,
			"the reading starts more than 3 years ago: older readings are not kept",
		}))
		stored := storedReadings(ctx, o.Namespace)
		Expect(stored).To(HaveLen(3))
		for _, r := range stored {
			Expect(r.Value).To(BeNumerically("<=", 20))
		}
	})
	It("never makes a partition in a request: a reading of a month without one is stored in the default partition until the leader's round moves it",
		func(ctx SpecContext) {
			// A month within the span made ahead (20 days from now: current or next) whose
			// partition is taken away, as if the leader had not made it yet.
			start := time.Now().UTC().Add(20 * 24 * time.Hour).Truncate(time.Hour)
			month := time.Date(start.Year(), start.Month(), 1, 0, 0, 0, 0, time.UTC)
			name := fmt.Sprintf("readings_%04d_%02d", month.Year(), int(month.Month()))
			_, err := database.Pool.Exec(ctx, "DROP TABLE IF EXISTS "+name)
			Expect(err).NotTo(HaveOccurred())
			partitioned := func() bool {
				var ok bool
				Expect(database.Pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
					WHERE i.inhparent = 'readings'::regclass AND c.relname = $1)`, name).Scan(&ok)).To(Succeed())
				return ok
			}

			status, _, resp := postReadings(Default, tok, readingsBody(reading(chargerID, "boundary_import_kw",
				start.Format(time.RFC3339), start.Add(30*time.Minute).Format(time.RFC3339), 0.5)), nil)
			Expect(status).To(Equal(http.StatusOK), "%s", resp)
			Expect(responsesOf(resp)[0]["accepted"]).To(BeTrue(), "%s", resp)
			Expect(partitioned()).To(BeFalse(), "the request made the partition %s", name)
			stored := storedReadings(ctx, o.Namespace)
			Expect(stored).To(HaveLen(1))
			Expect(stored[0].Partition).To(Equal("readings_default"))

			Expect((&db.ReadingPartitions{Pool: database.Pool, Back: readings.PartitionsBack, Ahead: readings.PartitionsAhead}).Round(ctx)).
				To(Succeed())
			Expect(partitioned()).To(BeTrue())
			stored = storedReadings(ctx, o.Namespace)
			Expect(stored).To(HaveLen(1))
			Expect(stored[0].Partition).To(Equal(name))
		})

	It("reports another organisation's asset exactly as an unknown one, and stores nothing for either", func(ctx SpecContext) {
		other := newOrg(ctx)
		otherTok := other.token()
		status, _, resp := postReadings(Default, otherTok, readingsBody(
			reading(chargerID, "boundary_import_kw", t0, t30, 2),
			reading(uuid.NewString(), "boundary_import_kw", t0, t30, 2),
		), nil)
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		rs := responsesOf(resp)
		Expect(rs).To(HaveLen(2))
		delete(rs[0], "asset_id")
		delete(rs[1], "asset_id")
		Expect(rs[0]).To(Equal(rs[1]))
		Expect(rs[0]).To(HaveKeyWithValue("error", "Asset not found or not authorized"))
		Expect(storedReadings(ctx, other.Namespace)).To(BeEmpty())
		Expect(storedReadings(ctx, o.Namespace)).To(BeEmpty())
	})

	It("replaces a reading sent again (same asset, label, start and end); within one request the last sent counts",
		func(ctx SpecContext) {
			send := func(rs ...map[string]any) {
				status, _, resp := postReadings(Default, tok, readingsBody(rs...), nil)
				ExpectWithOffset(1, status).To(Equal(http.StatusOK), "%s", resp)
				for _, r := range responsesOf(resp) {
					ExpectWithOffset(1, r["accepted"]).To(BeTrue(), "%v", r)
				}
			}
			values := func() []float64 {
				stored := storedReadings(ctx, o.Namespace)
				out := make([]float64, 0, len(stored))
				for _, r := range stored {
					out = append(out, r.Value)
				}
				return out
			}
			send(reading(chargerID, "charger_consumption_energy_kwh", t0, t30, 1.0),
				reading(chargerID, "charger_consumption_energy_kwh", t30, t60, 0.5))
			Expect(values()).To(Equal([]float64{1.0, 0.5}))
			// The same instant written with another offset is the same start.
			send(reading(chargerID, "charger_consumption_energy_kwh", "2026-04-14T18:00:00+01:00", t30, 2.5))
			Expect(values()).To(Equal([]float64{2.5, 0.5}))
			send(reading(chargerID, "charger_consumption_energy_kwh", t30, t60, 3.0),
				reading(chargerID, "charger_consumption_energy_kwh", t30, t60, 4.0))
			Expect(values()).To(Equal([]float64{2.5, 4.0}))
			// Another label or another end is another reading.
			send(reading(chargerID, "provisional_consumption_kwh", t30, t60, 0.7),
				reading(chargerID, "charger_consumption_energy_kwh", t30, t120, 9))
			Expect(storedReadings(ctx, o.Namespace)).To(HaveLen(4))
		})

	It("takes a gzip body, and refuses with 413 a body over the limit, plain or inflating past it, storing nothing",
		func(ctx SpecContext) {
			body := readingsBody(reading(batteryID, "battery_inverter_import_kw", t0, t30, -3.2))
			status, _, resp := postReadings(Default, tok, gzipped(body), map[string]string{"Content-Encoding": "gzip"})
			Expect(status).To(Equal(http.StatusOK), "%s", resp)
			Expect(responsesOf(resp)[0]["accepted"]).To(BeTrue())
			Expect(storedReadings(ctx, o.Namespace)).To(HaveLen(1))

			By("a gzip bomb: 40 KB that inflates to 64 MiB")
			bomb := append([]byte(`{"readings": [`), bytes.Repeat([]byte(" "), 64<<20)...)
			small := gzipped(bomb)
			Expect(len(small)).To(BeNumerically("<", 200<<10))
			status, _, resp = postReadings(Default, tok, small, map[string]string{"Content-Encoding": "gzip"})
			Expect(status).To(Equal(http.StatusRequestEntityTooLarge), "%s", resp)
			Expect(resp.Detail()).To(Equal("Request body larger than 8388608 bytes"))

			By("a plain body over 8 MiB: valid readings (fewer than the most a request may send), 413, none stored")
			many := make([]map[string]any, 0, 9000)
			for i := range 9000 {
				s := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
				r := reading(chargerID, "boundary_import_kw", s.Format(time.RFC3339), s.Add(time.Minute).Format(time.RFC3339), 1)
				r["note"] = strings.Repeat("x", 1000)
				many = append(many, r)
			}
			large := readingsBody(many...)
			Expect(len(large)).To(BeNumerically(">", 8<<20))
			status, _, resp = postReadings(Default, tok, large, nil)
			Expect(status).To(Equal(http.StatusRequestEntityTooLarge), "%s", resp)
			Expect(resp.Detail()).To(Equal("Request body larger than 8388608 bytes"))
			By("the same, compressed: still over the limit once inflated")
			status, _, resp = postReadings(Default, tok, gzipped(large), map[string]string{"Content-Encoding": "gzip"})
			Expect(status).To(Equal(http.StatusRequestEntityTooLarge), "%s", resp)
			Expect(storedReadings(ctx, o.Namespace)).To(HaveLen(1))

			By("a body that is not gzip as it says: 400; an encoding it does not take: 415")
			status, _, resp = postReadings(Default, tok, body, map[string]string{"Content-Encoding": "gzip"})
			Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
			Expect(resp.Detail()).To(ContainSubstring("not gzip"))
			truncated := gzipped(body)
			status, _, resp = postReadings(Default, tok, truncated[:len(truncated)-6], map[string]string{"Content-Encoding": "gzip"})
			Expect(status).To(Equal(http.StatusBadRequest), "%s", resp)
			status, _, resp = postReadings(Default, tok, body, map[string]string{"Content-Encoding": "br"})
			Expect(status).To(Equal(http.StatusUnsupportedMediaType), "%s", resp)
			Expect(resp.Detail()).To(ContainSubstring("br"))
		})

	It("answers a body that is not ReadingsDataPoints with 422, naming every problem, and stores nothing", func(ctx SpecContext) {
		good := reading(chargerID, "boundary_import_kw", t0, t30, 1)
		for _, c := range []struct {
			body string
			locs [][]any
			typ  string
		}{
			{`not json`, [][]any{{"body", 2.0}}, "json_invalid"},
			{`[]`, [][]any{{"body"}}, "model_attributes_type"},
			{`{}`, [][]any{{"body", "readings"}}, "missing"},
			{`{"readings": {}}`, [][]any{{"body", "readings"}}, "list_type"},
			{`{"readings": [7]}`, [][]any{{"body", "readings", 0.0}}, "model_attributes_type"},
			{string(readingsBody(good, reading(chargerID, "boundary_import_kw", t0, t30, "1.5"))),
				[][]any{{"body", "readings", 1.0, "value"}}, "float_type"},
			{string(readingsBody(good, reading(chargerID, "boundary_import_kw", "2026-04-14T17:00:00", t30, 1))),
				[][]any{{"body", "readings", 1.0, "start_timestamp"}}, "timezone_aware"},
			{string(readingsBody(good, reading(chargerID, "boundary_import_kw", t0, "yesterday", 1))),
				[][]any{{"body", "readings", 1.0, "end_timestamp"}}, "datetime_parsing"},
			{string(readingsBody(good, map[string]any{"asset_id": chargerID, "start_timestamp": t0, "end_timestamp": t30, "value": 1})),
				[][]any{{"body", "readings", 1.0, "label"}}, "missing"},
			{string(readingsBody(good, reading(chargerID, "boundary_import_kw", t0, t30, nil), reading(chargerID, "boundary_import_kw", t0, t30, true))),
				[][]any{{"body", "readings", 1.0, "value"}, {"body", "readings", 2.0, "value"}}, ""},
		} {
			status, _, resp := postReadings(Default, tok, []byte(c.body), nil)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", c.body, resp)
			detail, ok := resp.Detail().([]any)
			Expect(ok).To(BeTrue(), "%s", resp)
			var locs [][]any
			for _, d := range detail {
				item := d.(map[string]any)
				locs = append(locs, item["loc"].([]any))
				if c.typ != "" {
					Expect(item["type"]).To(Equal(c.typ), "%s: %s", c.body, resp)
				}
				Expect(item["msg"]).NotTo(BeEmpty())
			}
			Expect(locs).To(Equal(c.locs), "%s: %s", c.body, resp)
		}
		Expect(storedReadings(ctx, o.Namespace)).To(BeEmpty())
	})

	It("needs an organisation token with entity_write", func(ctx SpecContext) {
		body := readingsBody(reading(chargerID, "boundary_import_kw", t0, t30, 1))
		status, _, _ := postReadings(Default, "", body, nil)
		Expect(status).To(Equal(http.StatusUnauthorized))
		reader := newOrg(ctx, flexv1.RoleEntityRead)
		status, _, resp := postReadings(Default, reader.token(), body, nil)
		Expect(status).To(Equal(http.StatusForbidden), "%s", resp)
		Expect(storedReadings(ctx, o.Namespace)).To(BeEmpty())
	})

	It("answers 503 with Retry-After while the database is down, storing nothing, and takes readings again once it is back",
		Serial, func(ctx SpecContext) {
			if !database.CanStop() {
				Skip("the test database is not this process's server ($FLEXSITE_TEST_DATABASE_URL)")
			}
			body := readingsBody(reading(chargerID, "boundary_import_kw", t0, t30, 1),
				reading(batteryID, "battery_stored_energy_kwh", t30, t30, 6.5))
			Expect(database.Stop()).To(Succeed())
			stopped := true
			DeferCleanup(func(ctx SpecContext) {
				if stopped {
					Expect(database.Start(ctx)).To(Succeed())
				}
			})
			status, header, resp := postReadings(Default, tok, body, nil)
			Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
			Expect(header.Get("Retry-After")).To(Equal("5"))
			Expect(resp.Detail()).To(ContainSubstring("nothing was stored"))

			By("the Kubernetes-only endpoints answer meanwhile")
			Expect(mustCall("GET", "/entities/site/"+siteID, tok, nil)["asset_ids"]).To(ConsistOf(chargerID, batteryID))

			Expect(database.Start(ctx)).To(Succeed())
			stopped = false
			// The test's own pool finds its connections closed by the restart, and drops them.
			Eventually(func() error { _, err := database.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
			Expect(storedReadings(ctx, o.Namespace)).To(BeEmpty())
			Eventually(func(g Gomega) {
				status, _, resp := postReadings(g, tok, body, nil)
				g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			}).Should(Succeed())
			Expect(storedReadings(ctx, o.Namespace)).To(HaveLen(2))
		})
})
