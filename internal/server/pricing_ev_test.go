package server_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"time"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/bootstrap"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/schedulestore"
)

// The EV plug-in schedule over REST (docs/api.md, "The EV schedule"), and the OCPP profile of its
// answer. The prices are written straight through the price store (the price routes are
// another part's); the expected answers are worked by hand from the prices below.
var _ = Describe("The EV plug-in schedule", Ordered, func() {
	const mpan, unenrolledMPAN = "1200000000011", "1300000000016"
	var (
		o, other                  org
		tok, otherTok             string
		siteID, chargerID         string
		batteryID, unenrolledID   string
		schedulePath, profilePath string
		schedule                  func(blocks ...[2]string) (int, response)
	)
	// The days the schedules are asked for: winter, so UK time is UTC and the hand-worked
	// answers read plainly.
	day1, _ := prices.ParseDay("2027-01-14")
	day2 := day1.Next()
	priced := func(d prices.Day, hh, mm int, pounds int64) prices.Price {
		return prices.Price{Start: d.At(hh, mm), Centi: prices.Centi(pounds * 100)}
	}

	BeforeAll(func(ctx SpecContext) {
		o, other = newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite), newOrg(ctx, flexv1.RoleEntityRead, flexv1.RoleEntityWrite)
		tok, otherTok = o.token(), other.token()
		site := mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) { b["proposition"] = "price_curve" }))
		siteID = site["site"].(map[string]any)["site_id"].(string)
		chargerID = mustCall("GET", "/entities/asset/external-id/charger-"+mpan, tok, nil)["id"].(string)
		batteryID = mustCall("GET", "/entities/asset/external-id/battery-"+mpan, tok, nil)["id"].(string)
		mustCall("POST", "/entities/site/onboard", tok, household(unenrolledMPAN))
		unenrolledID = mustCall("GET", "/entities/asset/external-id/charger-"+unenrolledMPAN, tok, nil)["id"].(string)
		entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace,
			Name: identity.EnrolmentName(identity.SiteNameForMPAN(mpan), flexv1.PropositionPriceCurve)})
		schedulePath = "/entities/asset/" + chargerID + "/event/plug-in-schedule"
		profilePath = "/examples/ocpp-charging-profile?asset_id=" + chargerID

		// Day 1's evening from 22:00 and day 2's night to 07:00 (the rest undeclared): the
		// cheapest are 01:00 and 01:30 (£10), then 03:00 (£10, later), then 23:30 (£70).
		ps := &pricestore.Store{Pool: testDB.Pool}
		evening := []prices.Price{priced(day1, 22, 0, 100), priced(day1, 22, 30, 90), priced(day1, 23, 0, 80), priced(day1, 23, 30, 70)}
		night := make([]prices.Price, 0, 14)
		for h := range 7 {
			for _, m := range []int{0, 30} {
				pounds := int64(50)
				if h == 1 || (h == 3 && m == 0) {
					pounds = 10
				}
				night = append(night, priced(day2, h, m, pounds))
			}
		}
		for d, list := range map[prices.Day][]prices.Price{day1: evening, day2: night} {
			_, err := ps.Put(ctx, o.Namespace, "price_curve", d, list, "test", time.Now())
			Expect(err).NotTo(HaveOccurred())
		}
		schedule = func(blocks ...[2]string) (int, response) {
			list := make([]any, len(blocks))
			for i, b := range blocks {
				list[i] = map[string]any{"start_timestamp": b[0], "end_timestamp": b[1]}
			}
			return call("POST", schedulePath, tok, map[string]any{"charging_schedule": list})
		}
	})

	answered := func(status int, resp response) []any {
		GinkgoHelper()
		Expect(status).To(Equal(http.StatusOK), "%s", resp)
		return resp.Map()["modified_charging_schedule"].([]any)
	}
	block := func(from, to string) map[string]any {
		return map[string]any{"start_timestamp": from, "end_timestamp": to}
	}

	It("refuses the schedule with 403 until the site consents to limited_pause dispatch (prod's consent)", func() {
		mustCall("POST", "/entities/site/"+siteID+"/dispatch-deconsent", tok, map[string]any{"dispatch_methods": []any{"limited_pause"}})
		// The cache follows the site's update: until then the charger may still be answered.
		Eventually(func() any {
			_, resp := schedule([2]string{"2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z"})
			return resp.Detail()
		}).Should(Equal("Site lacking required limited_pause dispatch consent"))
		mustCall("POST", "/entities/site/"+siteID+"/dispatch-consent", tok, map[string]any{"dispatch_methods": []any{"limited_pause"}})
	})

	It("answers the cheapest half-hours of the window, the last block's end as the deadline without an intent", func() {
		// n = 2 (two half-hour blocks); window 22:00–00:00; the cheapest are 23:00 (£80) and 23:30 (£70).
		Eventually(func() []any {
			status, resp := schedule([2]string{"2027-01-14T22:00:00+00:00", "2027-01-14T22:30:00+00:00"},
				[2]string{"2027-01-14T23:30:00Z", "2027-01-15T00:00:00Z"})
			if status != http.StatusOK {
				return nil
			}
			return answered(status, resp)
		}).Should(Equal([]any{block("2027-01-14T23:00:00Z", "2027-01-15T00:00:00Z")}))
	})

	It("reads the intent's ready_by_local_time past midnight as the deadline", func() {
		mustCall("POST", "/entities/asset/"+chargerID+"/event/intent", tok, map[string]any{"intent": map[string]any{
			"energy_required_kwh": 14, "ready_by": "2027-01-15T07:00:00Z", "ready_by_local_time": "07:00"}})
		// Window 22:00–07:00; n = 2: 01:00 and 01:30 (£10; 03:00 ties on price, later).
		Expect(answered(schedule([2]string{"2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z"}))).To(Equal(
			[]any{block("2027-01-15T01:00:00Z", "2027-01-15T02:00:00Z")}))
	})

	It("keeps every answer, and the OCPP example builds the latest one's profile, valid against OCPP 1.6's schema", func(ctx SpecContext) {
		answers, err := (&schedulestore.Store{Pool: testDB.Pool}).LatestOfSite(ctx, o.Namespace, siteID, time.Now())
		Expect(err).NotTo(HaveOccurred())
		Expect(answers).To(HaveLen(1))
		Expect(answers[0].AssetID).To(Equal(chargerID))
		Expect(answers[0].Changed).To(BeTrue())
		Expect(answers[0].WindowEnd).To(BeTemporally("==", day2.At(7, 0)))
		Expect(answers[0].Blocks).To(Equal([]schedulestore.Block{{Start: day2.At(1, 0).UTC(), End: day2.At(2, 0).UTC()}}))

		status, body := call("GET", profilePath, tok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		raw, err := os.ReadFile("testdata/ocpp-1.6-SetChargingProfile.schema.json")
		Expect(err).NotTo(HaveOccurred())
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		Expect(err).NotTo(HaveOccurred())
		c := jsonschema.NewCompiler()
		c.DefaultDraft(jsonschema.Draft4)
		Expect(c.AddResource("https://flexsite.invalid/ocpp.json", doc)).To(Succeed())
		schema, err := c.Compile("https://flexsite.invalid/ocpp.json")
		Expect(err).NotTo(HaveOccurred())
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		Expect(schema.Validate(inst)).To(Succeed())
		var profile struct {
			CS struct {
				Schedule struct {
					Start   time.Time `json:"startSchedule"`
					Periods []struct {
						StartPeriod int     `json:"startPeriod"`
						Limit       float64 `json:"limit"`
					} `json:"chargingSchedulePeriod"`
				} `json:"chargingSchedule"`
			} `json:"csChargingProfiles"`
		}
		Expect(json.Unmarshal(body, &profile)).To(Succeed())
		// From the window's start (22:00): 0 W, 7.4 kW from 01:00 (3 h in), 0 W from 02:00.
		Expect(profile.CS.Schedule.Start).To(BeTemporally("==", day1.At(22, 0)))
		Expect(profile.CS.Schedule.Periods).To(HaveLen(3))
		Expect(profile.CS.Schedule.Periods[1].StartPeriod).To(Equal(3 * 3600))
		Expect(profile.CS.Schedule.Periods[1].Limit).To(Equal(7400.0))
		Expect(profile.CS.Schedule.Periods[2].StartPeriod).To(Equal(4 * 3600))
		Expect(profile.CS.Schedule.Periods[2].Limit).To(Equal(0.0))

		By("the plain example validates too; another organisation's asset, or one never answered, is 404")
		status, body = call("GET", "/examples/ocpp-charging-profile", otherTok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
		inst, err = jsonschema.UnmarshalJSON(bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		Expect(schema.Validate(inst)).To(Succeed())
		status, body = call("GET", profilePath, otherTok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", body)
		status, body = call("GET", "/examples/ocpp-charging-profile?asset_id="+unenrolledID, tok, nil)
		Expect(status).To(Equal(http.StatusNotFound), "%s", body)
		status, body = call("GET", "/examples/ocpp-charging-profile?asset_id=not-a-uuid", tok, nil)
		Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", body)
		status, body = call("GET", "/examples/ocpp-charging-profile", "", nil)
		Expect(status).To(Equal(http.StatusUnauthorized), "%s", body)
	})

	It("answers an asset's profile only to a token with entity_read; the plain example to any role (prod's)", func(ctx SpecContext) {
		// Another API client of the same organisation, without entity_read.
		writer := org{Namespace: o.Namespace, Username: o.Username + "-writer", Password: o.Password + "-w"}
		Expect(bootstrap.EnsureOrganisation(ctx, k8sClient, bootstrap.Organisation{Namespace: writer.Namespace,
			Username: writer.Username, Password: writer.Password, Roles: []flexv1.Role{flexv1.RoleEntityWrite}})).To(Succeed())
		writerTok := writer.token()
		Expect(mustCall("GET", profilePath, tok, nil)).To(HaveKey("csChargingProfiles"))
		for _, path := range []string{profilePath, "/examples/ocpp-charging-profile?asset_id=" + uuid.NewString(),
			"/examples/ocpp-charging-profile?asset_id="} {
			status, body := call("GET", path, writerTok, nil)
			Expect(status).To(Equal(http.StatusForbidden), "%s: %s", path, body)
			Expect(body.Detail()).To(Equal("The API client lacks the entity_read role"))
		}
		status, body := call("GET", "/examples/ocpp-charging-profile", writerTok, nil)
		Expect(status).To(Equal(http.StatusOK), "%s", body)
	})

	It("leaves out half-hours under a turn-down dispatch of the asset", func(ctx SpecContext) {
		_, err := (&dispatchstore.Store{Pool: testDB.Pool}).Issue(ctx, o.Namespace, "https://flexsite.test",
			[]dispatchstore.Dispatch{{FlexEvent: "ev-turn-down", SiteID: siteID, AssetID: chargerID, MarketID: "limited_pause",
				LevelKW: 7.4, From: day2.At(1, 0), To: day2.At(1, 30), EventTimestamp: time.Now()}}, nil, time.Now())
		Expect(err).NotTo(HaveOccurred())
		// 01:00 is under the dispatch: 01:30 and 03:00 (£10 each).
		Expect(answered(schedule([2]string{"2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z"}))).To(Equal([]any{
			block("2027-01-15T01:30:00Z", "2027-01-15T02:00:00Z"), block("2027-01-15T03:00:00Z", "2027-01-15T03:30:00Z")}))
	})

	It("answers the request unchanged when the window has too few priced half-hours", func() {
		// 1 February has no prices: the request comes back as sent, in UTC.
		Expect(answered(schedule([2]string{"2027-02-01T10:00:00+01:00", "2027-02-01T10:45:00+01:00"}))).To(Equal(
			[]any{block("2027-02-01T09:00:00Z", "2027-02-01T09:45:00Z")}))
	})

	It("answers 404 for a battery, an unknown asset, another organisation's, and a charger not on price_curve", func() {
		body := map[string]any{"charging_schedule": []any{block("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z")}}
		for _, c := range []struct{ asset, token string }{{batteryID, tok}, {uuid.NewString(), tok}, {chargerID, otherTok}, {unenrolledID, tok}} {
			status, resp := call("POST", "/entities/asset/"+c.asset+"/event/plug-in-schedule", c.token, body)
			Expect(status).To(Equal(http.StatusNotFound), "%s: %s", c.asset, resp)
			Expect(resp.Detail()).To(Equal("Charger not found or not authorized to access"))
		}
	})

	It("answers 422 at the field for a bad body or id", func() {
		cases := map[string]struct {
			path string
			body any
			loc  []any
		}{
			"no schedule":    {schedulePath, map[string]any{}, []any{"body", "charging_schedule"}},
			"empty schedule": {schedulePath, map[string]any{"charging_schedule": []any{}}, []any{"body", "charging_schedule"}},
			"no zone": {schedulePath, map[string]any{"charging_schedule": []any{block("2027-01-14T22:00:00", "2027-01-14T23:00:00Z")}},
				[]any{"body", "charging_schedule", 0.0, "start_timestamp"}},
			"end before start": {schedulePath, map[string]any{"charging_schedule": []any{block("2027-01-14T23:00:00Z", "2027-01-14T22:00:00Z")}},
				[]any{"body", "charging_schedule", 0.0, "end_timestamp"}},
			"overlapping": {schedulePath, map[string]any{"charging_schedule": []any{block("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z"),
				block("2027-01-14T22:30:00Z", "2027-01-14T23:30:00Z")}}, []any{"body", "charging_schedule", 1.0, "start_timestamp"}},
			"over 48 hours": {schedulePath, map[string]any{"charging_schedule": []any{block("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z"),
				block("2027-01-16T22:00:00Z", "2027-01-16T23:00:00Z")}}, []any{"body", "charging_schedule"}},
			"not a uuid": {"/entities/asset/nope/event/plug-in-schedule", map[string]any{"charging_schedule": []any{
				block("2027-01-14T22:00:00Z", "2027-01-14T23:00:00Z")}}, []any{"path", "asset_id"}},
		}
		for name, c := range cases {
			status, resp := call("POST", c.path, tok, c.body)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s: %s", name, resp)
			Expect(resp.Detail()).To(ContainElement(HaveKeyWithValue("loc", c.loc)), "%s: %s", name, resp)
		}
	})

	It("answers 503 with Retry-After while the database is away, and keeps nothing", func(ctx SpecContext) {
		if !testDB.CanStop() {
			Skip("the test database's server is not this process's")
		}
		Expect(testDB.Stop()).To(Succeed())
		DeferCleanup(func(ctx SpecContext) { Expect(testDB.Start(ctx)).To(Succeed()) })
		status, header, resp := callWithHeader("POST", schedulePath, tok, map[string]any{"charging_schedule": []any{
			block("2027-01-20T22:00:00Z", "2027-01-20T23:00:00Z")}})
		Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
		Expect(header.Get("Retry-After")).To(MatchRegexp(`^[1-9][0-9]*$`))
		status, header, resp = callWithHeader("GET", profilePath, tok, nil)
		Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
		Expect(header.Get("Retry-After")).NotTo(BeEmpty())
		Expect(testDB.Start(ctx)).To(Succeed())
		Eventually(func() error { _, err := testDB.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
		var n int
		Expect(testDB.Pool.QueryRow(ctx, `SELECT count(*) FROM ev_schedules WHERE organisation = $1
			AND window_end = '2027-01-20T23:00:00Z'`, o.Namespace).Scan(&n)).To(Succeed())
		Expect(n).To(BeZero())
	})
})
