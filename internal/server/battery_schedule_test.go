package server_test

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/identity"
	"github.com/flexsite/flexsite/internal/prices"
	"github.com/flexsite/flexsite/internal/pricestore"
	"github.com/flexsite/flexsite/internal/settlement"
)

// Specs of GET /entities/asset/{asset_id}/battery-schedule (docs/api.md, "Battery schedule")
// against the real API server and a real PostgreSQL: a battery actively enrolled in
// full_asset_schedule_control gets the hand-computed schedule of tomorrow's prices (charge in
// the cheapest half-hours, discharge in the dearest, avoid_export elsewhere, merged), a
// turn-down dispatch's half-hours are discharge_max that may not deviate; a charger, a battery
// of a site not enrolled, another organisation's battery are 404, a non-UUID 422, and the
// database down 503 with Retry-After. The prices are written through the store (the PUT route
// is another part's).

// batteryMPAN makes the i-th MPAN of these specs' series.
func batteryMPAN(i int) string { return validMPAN(36500 + i) }

// batteryStep is one expected step: London wall times of tomorrow (or the horizon's start).
type batteryStep struct {
	from, to  time.Time
	action    string
	deviation bool
}

func (s batteryStep) json() map[string]any {
	return map[string]any{"start_timestamp": s.from.UTC().Format(time.RFC3339),
		"end_timestamp": s.to.UTC().Format(time.RFC3339), "action": s.action, "allow_deviation": s.deviation}
}

// batteryDayPrices are a day's prices for these specs: 50.00 every half-hour, 10.00 from 01:00
// to 02:00 and 100.00 from 17:00 to 18:00 (UK local times), whatever the day's length.
func batteryDayPrices(day prices.Day) []prices.Price {
	periods := day.Periods()
	out := make([]prices.Price, 0, len(periods))
	for _, t := range periods {
		c := prices.Centi(5000)
		switch t.In(settlement.London).Hour() {
		case 1:
			c = 1000
		case 17:
			c = 10000
		}
		out = append(out, prices.Price{Start: t, Centi: c})
	}
	return out
}

var _ = Describe("Battery schedule", func() {
	var (
		o                  org
		tok                string
		siteID, siteName   string
		chargerID, battery string
		tomorrow           prices.Day
		declaredAt         time.Time
		schedulePath       = func(id string) string { return "/entities/asset/" + id + "/battery-schedule" }
		onboardFASC        = func(tok, mpan string) map[string]any {
			return mustCall("POST", "/entities/site/onboard", tok, household(mpan, func(b map[string]any) {
				b["proposition"] = "full_asset_schedule_control"
				// 5 kWh at 5 kW: k = ceil(5 / (5 × 0.5)) = 2 pairs.
				b["assets"].([]any)[1].(map[string]any)["properties"] = map[string]any{"power_kw": 5, "capacity_kwh": 5}
			}))
		}
	)
	BeforeEach(func(ctx SpecContext) {
		needDatabase()
		o = newOrg(ctx)
		tok = o.token()
		mpan := batteryMPAN(CurrentSpecReport().LeafNodeLocation.LineNumber)
		answer := onboardFASC(tok, mpan)
		siteID = entitySiteID(answer)
		ids := entityAssetIDs(answer)
		chargerID, battery = ids[0].(string), ids[1].(string)
		siteName = identity.SiteNameForMPAN(mpan)
		entityWaitActive(ctx, client.ObjectKey{Namespace: o.Namespace,
			Name: identity.EnrolmentName(siteName, flexv1.PropositionFullAssetScheduleControl)})

		// Tomorrow's prices: 50.00 every half-hour, 10.00 from 01:00 to 02:00, 100.00 from 17:00
		// to 18:00. Today is left undeclared: its half-hours are unpriced.
		tomorrow = prices.Tomorrow(serverNow())
		ps := batteryDayPrices(tomorrow)
		declaredAt = time.Now().UTC().Truncate(time.Second)
		_, err := (&pricestore.Store{Pool: database.Pool}).Put(ctx, o.Namespace, "full_asset_schedule_control", tomorrow,
			ps, "battery-spec", declaredAt)
		Expect(err).NotTo(HaveOccurred())
	})

	// schedule waits until the battery's schedule answers (the cache sees the enrolment
	// active) and returns it.
	schedule := func(id string) map[string]any {
		var out map[string]any
		Eventually(func(g Gomega) {
			status, resp := call("GET", schedulePath(id), tok, nil)
			g.Expect(status).To(Equal(http.StatusOK), "%s", resp)
			out = resp.MapG(g)
		}).Should(Succeed())
		return out
	}
	// wantSteps are the steps from the horizon's start (the first step's) given tomorrow's.
	wantSteps := func(got map[string]any, steps ...batteryStep) []any {
		first := got["schedule_steps"].([]any)[0].(map[string]any)["start_timestamp"].(string)
		start, err := time.Parse(time.RFC3339, first)
		Expect(err).NotTo(HaveOccurred())
		out := make([]any, 0, 1+len(steps))
		out = append(out, batteryStep{start, tomorrow.At(1, 0), "avoid_export", true}.json())
		for _, s := range steps {
			out = append(out, s.json())
		}
		return out
	}

	It("charges in the cheapest half-hours and discharges in the dearest, avoid_export elsewhere, merged", func(ctx SpecContext) {
		got := schedule(battery)
		at := tomorrow.At
		Expect(got["schedule_steps"]).To(Equal(wantSteps(got,
			batteryStep{at(1, 0), at(2, 0), "charge_max", true},
			batteryStep{at(2, 0), at(17, 0), "avoid_export", true},
			batteryStep{at(17, 0), at(18, 0), "discharge_max", true},
			batteryStep{at(18, 0), at(23, 0), "avoid_export", true})))
		Expect(got["schedule_last_updated"]).To(Equal(declaredAt.Format(time.RFC3339)))
	})

	It("discharges under a turn-down dispatch, allowing no deviation, and dates the schedule by it", func(ctx SpecContext) {
		issued := time.Now().UTC()
		_, err := (&dispatchstore.Store{Pool: database.Pool}).Issue(ctx, o.Namespace, "https://flexsite.test",
			[]dispatchstore.Dispatch{{FlexEvent: "battery-turn-down", SiteID: siteID, AssetID: battery,
				MarketID: "full_asset_schedule_control", LevelKW: 5,
				From: tomorrow.At(10, 0), To: tomorrow.At(11, 0), EventTimestamp: issued}}, nil, issued)
		Expect(err).NotTo(HaveOccurred())
		got := schedule(battery)
		at := tomorrow.At
		Expect(got["schedule_steps"]).To(Equal(wantSteps(got,
			batteryStep{at(1, 0), at(2, 0), "charge_max", true},
			batteryStep{at(2, 0), at(10, 0), "avoid_export", true},
			batteryStep{at(10, 0), at(11, 0), "discharge_max", false},
			batteryStep{at(11, 0), at(17, 0), "avoid_export", true},
			batteryStep{at(17, 0), at(18, 0), "discharge_max", true},
			batteryStep{at(18, 0), at(23, 0), "avoid_export", true})))
		last, err := time.Parse(time.RFC3339Nano, got["schedule_last_updated"].(string))
		Expect(err).NotTo(HaveOccurred())
		Expect(last).To(BeTemporally(">=", issued.Truncate(time.Millisecond)))
	})

	It("tells a charger, a battery of a site not enrolled, another organisation's battery and an unknown one 404, a non-UUID 422",
		func(ctx SpecContext) {
			schedule(battery) // the enrolment is seen: what follows is not a cache's lag

			status, resp := call("GET", schedulePath(chargerID), tok, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)

			notEnrolled := entityAssetIDs(entityInitialise(tok, batteryMPAN(1)))[1].(string)
			status, resp = call("GET", schedulePath(notEnrolled), tok, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)

			other := newOrg(ctx)
			status, resp = call("GET", schedulePath(battery), other.token(), nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)
			Expect(string(resp)).NotTo(ContainSubstring(battery))

			status, resp = call("GET", schedulePath("8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"), tok, nil)
			Expect(status).To(Equal(http.StatusNotFound), "%s", resp)

			status, resp = call("GET", schedulePath("not-a-uuid"), tok, nil)
			Expect(status).To(Equal(http.StatusUnprocessableEntity), "%s", resp)
			Expect(resp.Detail()).To(ContainElement(HaveKeyWithValue("loc", []any{"path", "asset_id"})))
		})

	It("answers 503 with Retry-After while the database is down, and the schedule once it is back", Serial, func(ctx SpecContext) {
		if !database.CanStop() {
			Skip("the test database is not this process's server ($FLEXSITE_TEST_DATABASE_URL)")
		}
		schedule(battery)
		Expect(database.Stop()).To(Succeed())
		stopped := true
		DeferCleanup(func(ctx SpecContext) {
			if stopped {
				Expect(database.Start(ctx)).To(Succeed())
			}
		})
		status, header, resp := callWithHeader("GET", schedulePath(battery), tok, nil)
		Expect(status).To(Equal(http.StatusServiceUnavailable), "%s", resp)
		Expect(header.Get("Retry-After")).To(Equal("5"))

		Expect(database.Start(ctx)).To(Succeed())
		stopped = false
		// The suite's own pool holds connections the stop ended: the next spec's queries
		// must not meet them.
		database.Pool.Reset()
		Eventually(func() error { _, err := database.Pool.Exec(ctx, "SELECT 1"); return err }).Should(Succeed())
		Expect(schedule(battery)["schedule_steps"]).NotTo(BeEmpty())
	})
})
