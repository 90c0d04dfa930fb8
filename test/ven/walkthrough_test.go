package ven_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"golang.org/x/oauth2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/test/ven"
)

// The walkthrough of docs/openadr.md, "For VEN makers", step by step, by a VEN generated from
// the Alliance's document: everything it does goes through the generated client; the
// organisation's business logic speaks REST, as Flexsite's users do.

// usageLabel is the readings label a charger's USAGE report becomes (docs/openadr.md,
// "What to report"): the household's history before the event is sent under the same label
// through POST /data/readings, so that the settlement compares like with like.
const usageLabel = "charger_consumption_energy_kwh"

// The settlement's first worked example (docs/api.md, "Flex events are money"): the charger
// used 1.8 then 2.6 kWh in the event's two half-hours on the working days before; on the day,
// paused, 0.4 then 2.9 kWh; at 25p/kWh that is £0.35.
var (
	usualKWh  = [2]float64{1.8, 2.6}
	actualKWh = [2]float64{0.4, 2.9}
)

const (
	ratePence   = 25
	creditPence = 35
)

// objectOperation and reportResource are the document's inline shapes, as generated.
type objectOperation = struct {
	BearerToken *string                                      `json:"bearerToken,omitempty"`
	CallbackUrl string                                       `json:"callbackUrl"`
	Objects     []ven.ObjectTypes                            `json:"objects"`
	Operations  []ven.SubscriptionObjectOperationsOperations `json:"operations"`
}

type reportResource = struct {
	IntervalPeriod *ven.IntervalPeriod `json:"intervalPeriod,omitempty"`
	Intervals      []ven.Interval      `json:"intervals"`
	ResourceName   string              `json:"resourceName"`
}

var _ = Describe("A VEN generated from the Alliance's document", func() {
	It("takes part in a flex event: token, programs, VEN and resource, subscription, the event on its callback, "+
		"OPERATING_STATE then USAGE reports, the household's credit", func(ctx SpecContext) {
		// The event's window is a working day's 17:30–18:30, days ahead (its history is on the
		// working days before); the clock starts two hours before it and moves through it.
		start := eventDay(time.Now())
		end := start.Add(time.Hour)
		setClock(ctx, start.Add(-2*time.Hour), "")
		o := newOrg(ctx)

		By("the organisation onboards a household with a charger in limited_pause, with its history and dispatch consent (REST)")
		rest := o.restToken()
		siteID, chargerID := onboard(ctx, o, rest, mpan(1))
		sendHistory(rest, chargerID, start)

		By("the VEN's token: OAuth 2.0 client credentials at auth/token, for the scopes a VEN needs")
		venCtx := conforming(ctx)
		venScopes := []string{"read_all", "write_vens", "write_subscriptions", "write_reports"}
		creds := credentials(o.VENClient, o.VENClientPassword, venScopes...)
		var tok *oauth2.Token
		Eventually(func(g Gomega) {
			var err error
			tok, err = creds.Token(venCtx)
			g.Expect(err).NotTo(HaveOccurred())
		}).Should(Succeed())
		Expect(tok.AccessToken).NotTo(BeEmpty())
		Expect(tok.Type()).To(Equal("Bearer"))
		Expect(strings.Fields(tok.Extra("scope").(string))).To(ConsistOf(venScopes))
		By("a VEN's client is refused the business logic's scope")
		_, err := credentials(o.VENClient, o.VENClientPassword, "write_events").Token(venCtx)
		var refused *oauth2.RetrieveError
		Expect(errors.As(err, &refused)).To(BeTrue(), "%v", err)
		Expect(refused.ErrorCode).To(Equal("invalid_scope"))
		c := vtn(venCtx, creds)

		By("GET /programs: limited_pause, its events carrying DISPATCH_SETPOINT")
		programs, err := c.SearchAllProgramsWithResponse(venCtx, &ven.SearchAllProgramsParams{})
		Expect(err).NotTo(HaveOccurred())
		Expect(programs.StatusCode()).To(Equal(http.StatusOK), "%s", programs.Body)
		var program *ven.Program
		for i := range *programs.JSON200 {
			if (*programs.JSON200)[i].ProgramName == string(flexv1.PropositionLimitedPause) {
				program = &(*programs.JSON200)[i]
			}
		}
		Expect(program).NotTo(BeNil(), "%s", programs.Body)
		Expect(program.Id).To(HaveValue(Equal(program.ProgramName)))
		Expect(program.PayloadDescriptors).NotTo(BeNil())
		carried := make([]string, 0, len(*program.PayloadDescriptors))
		for _, item := range *program.PayloadDescriptors {
			d, err := item.AsEventPayloadDescriptor()
			Expect(err).NotTo(HaveOccurred())
			carried = append(carried, d.PayloadType)
		}
		Expect(carried).To(ContainElement("DISPATCH_SETPOINT"))
		programID := *program.Id

		By("POST /vens: the VEN registers itself")
		venName := "ven-" + o.Namespace
		registered, err := c.CreateVenWithResponse(venCtx, ven.Ven{VenName: venName})
		Expect(err).NotTo(HaveOccurred())
		Expect(registered.StatusCode()).To(Equal(http.StatusCreated), "%s", registered.Body)
		Expect(registered.JSON201.Id).NotTo(BeNil())
		venID := *registered.JSON201.Id
		Expect(registered.JSON201.VenName).To(Equal(venName))

		By("POST /vens/{venID}/resources: the charger, named by its asset_id")
		resource, err := c.CreateResourceWithResponse(venCtx, venID, ven.Resource{ResourceName: chargerID, VenID: &venID})
		Expect(err).NotTo(HaveOccurred())
		Expect(resource.StatusCode()).To(Equal(http.StatusCreated), "%s", resource.Body)
		Expect(resource.JSON201.ResourceName).To(Equal(chargerID))
		Expect(resource.JSON201.VenID).To(HaveValue(Equal(venID)))

		By("POST /subscriptions: the program's events, to the VEN's HTTPS callback with a bearer token")
		bearer := "bearer-" + o.Namespace
		callback := newReceiver(bearer)
		subscribed, err := c.CreateSubscriptionWithResponse(venCtx, ven.Subscription{
			ClientName: venName, ProgramID: programID,
			ObjectOperations: []objectOperation{{CallbackUrl: callback.CallbackURL(), BearerToken: &bearer,
				Objects: []ven.ObjectTypes{ven.ObjectTypesEVENT},
				Operations: []ven.SubscriptionObjectOperationsOperations{ven.SubscriptionObjectOperationsOperationsCREATE,
					ven.SubscriptionObjectOperationsOperationsUPDATE, ven.SubscriptionObjectOperationsOperationsDELETE}}},
		})
		Expect(err).NotTo(HaveOccurred())
		Expect(subscribed.StatusCode()).To(Equal(http.StatusCreated), "%s", subscribed.Body)
		Expect(subscribed.JSON201.Id).NotTo(BeNil())

		By("the business logic declares a flex event over the household (REST POST /flex-events)")
		flexEvent := declare(rest, siteID, start)

		By("the event arrives on the VEN's callback, with the subscription's bearer token")
		var told ven.Event
		Eventually(func(g Gomega) {
			got := callback.Events(ven.NotificationOperationPOST)
			g.Expect(got).NotTo(BeEmpty())
			told = got[0]
		}).Should(Succeed())
		Expect(told.Id).NotTo(BeNil())
		Expect(callback.Malformed()).To(BeEmpty(), "every notification is the document's")
		// Delivery is at least once: a POST told again is the same event.
		Expect(callback.Events(ven.NotificationOperationPOST)).To(HaveEach(HaveField("Id", HaveValue(Equal(*told.Id)))))
		Expect(told.Targets).NotTo(BeNil())
		Expect(*told.Targets).To(ContainElement(HaveField("Values", WithTransform(texts, ConsistOf(chargerID)))))
		Expect(callback.Refused()).To(BeZero())

		By("GET /events: exactly the event of its resource, with DISPATCH_SETPOINT intervals over the window")
		var event ven.Event
		Eventually(func(g Gomega) {
			events, err := c.SearchAllEventsWithResponse(venCtx, &ven.SearchAllEventsParams{})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(events.StatusCode()).To(Equal(http.StatusOK), "%s", events.Body)
			g.Expect(*events.JSON200).To(HaveLen(1), "%s", events.Body)
			event = (*events.JSON200)[0]
		}).Should(Succeed())
		Expect(event.Id).To(Equal(told.Id))
		Expect(event.ProgramID).To(Equal(programID))
		Expect(event.Targets).NotTo(BeNil())
		Expect(*event.Targets).To(ContainElement(And(HaveField("Type", "RESOURCE_NAME"),
			HaveField("Values", WithTransform(texts, ConsistOf(chargerID))))))
		Expect(windowOf(event)).To(Equal([]time.Time{start, start.Add(30 * time.Minute)}))
		for _, in := range event.Intervals {
			Expect(payload(in, "DISPATCH_SETPOINT")).To(Equal([]float64{0}), "a charger turned down: paused, 0 kW")
		}
		Expect(event.ReportDescriptors).NotTo(BeNil())
		asked := make([]string, 0, len(*event.ReportDescriptors))
		for _, d := range *event.ReportDescriptors {
			asked = append(asked, d.PayloadType)
		}
		Expect(asked).To(ContainElements("OPERATING_STATE", "USAGE"))
		eventID := *event.Id

		report := func(name string, descriptor ven.ReportPayloadDescriptor, intervals ...ven.Interval) {
			GinkgoHelper()
			sent, err := c.CreateReportWithResponse(venCtx, ven.Report{ClientName: venName, ProgramID: programID,
				EventID: eventID, ReportName: &name, PayloadDescriptors: &[]ven.ReportPayloadDescriptor{descriptor},
				Resources: []reportResource{{ResourceName: chargerID, Intervals: intervals}}})
			Expect(err).NotTo(HaveOccurred())
			Expect(sent.StatusCode()).To(Equal(http.StatusCreated), "%s", sent.Body)
			Expect(sent.JSON201.Id).NotTo(BeNil())
		}
		operatingState := func(state string) {
			GinkgoHelper()
			report(reportName(state), ven.ReportPayloadDescriptor{PayloadType: "OPERATING_STATE"}, ven.Interval{Id: 0,
				IntervalPeriod: &ven.IntervalPeriod{Start: *clock.Load()}, Payloads: []ven.ValuesMap{valuesMap("OPERATING_STATE", state)}})
		}

		By("an OPERATING_STATE report before the window: the dispatch is ACCEPTED (REST shows it)")
		operatingState("RUNNING_NORMAL")
		Eventually(dispatches(rest, flexEvent)).Should(HaveKeyWithValue("accepted", BeNumerically("==", 1)))

		By("inside the window, IDLE_CURTAILED: the dispatch is EXECUTED")
		setClock(ctx, start.Add(10*time.Minute), o.Namespace, flexEvent)
		operatingState("IDLE_CURTAILED")
		Eventually(dispatches(rest, flexEvent)).Should(HaveKeyWithValue("executed", BeNumerically("==", 1)))

		By("after the window, a USAGE report of each half-hour: it becomes the charger's readings")
		setClock(ctx, end.Add(5*time.Minute), "")
		half := "PT30M"
		report("usage", ven.ReportPayloadDescriptor{PayloadType: "USAGE", Units: ptr("KWH"), ReadingType: ptr("DIRECT_READ")},
			ven.Interval{Id: 0, IntervalPeriod: &ven.IntervalPeriod{Start: start, Duration: &half},
				Payloads: []ven.ValuesMap{valuesMap("USAGE", float32(actualKWh[0]))}},
			ven.Interval{Id: 1, IntervalPeriod: &ven.IntervalPeriod{Start: start.Add(30 * time.Minute), Duration: &half},
				Payloads: []ven.ValuesMap{valuesMap("USAGE", float32(actualKWh[1]))}})
		Expect(readingsOf(ctx, o.Namespace, chargerID, start, end)).To(And(HaveLen(1), HaveKeyWithValue(usageLabel,
			HaveExactElements(BeNumerically("~", actualKWh[0], 1e-6), BeNumerically("~", actualKWh[1], 1e-6)))),
			"the USAGE intervals, stored as the charger's readings")

		By("the event settles from them and the household is credited, as from REST readings")
		setClock(ctx, end.Add(5*time.Minute), o.Namespace, flexEvent)
		settled(rest, flexEvent, siteID)
		Expect(callback.Refused()).To(BeZero())
		Expect(callback.Malformed()).To(BeEmpty())
	})
})

// onboard onboards a household with a charger in limited_pause, waits for its enrolment, and
// gives its dispatch consent: the site's and the charger's ids.
func onboard(ctx context.Context, o org, rest, mpan string) (siteID, chargerID string) {
	GinkgoHelper()
	status, onboarded := call(Default, "POST", "/entities/site/onboard", rest, map[string]any{
		"site": map[string]any{"mpan": mpan, "postcode": "SW1A 1AA", "email": "ven-" + o.Namespace + "@example.com",
			"gave_boundary_meter_consent_at": "2026-01-15T10:30:00Z"},
		"assets": []any{map[string]any{"external_id": "charger-" + o.Namespace, "type": "charger", "asset_model": "zappi",
			"installation_date": "2025-06-15", "properties": map[string]any{"power_kw": 7.4}}},
		"proposition": "limited_pause",
	})
	Expect(status).To(Equal(http.StatusOK), "%v", onboarded)
	siteID = onboarded["site"].(map[string]any)["site_id"].(string)
	chargerID = onboarded["assets"].([]any)[0].(map[string]any)["asset_id"].(string)
	Eventually(func(g Gomega) {
		list := &flexv1.EnrolmentList{}
		g.Expect(k8sClient.List(ctx, list, client.InNamespace(o.Namespace))).To(Succeed())
		g.Expect(list.Items).To(ContainElement(And(HaveField("Spec.Proposition", flexv1.PropositionLimitedPause),
			HaveField("Status.Phase", flexv1.EnrolmentActive))))
	}).Should(Succeed())
	status, consent := call(Default, "POST", "/entities/site/"+siteID+"/dispatch-consent", rest,
		map[string]any{"dispatch_methods": []any{"limited_pause"}})
	Expect(status).To(Equal(http.StatusOK), "%v", consent)
	return siteID, chargerID
}

// eventDay is the suite's flex event start: 17:30 UK time on the first working day at least
// three days after now. The suite's clock, not the machine's, walks through it: it is ahead of
// the objects' creation times (the API server's clock), so the dispatches fall due as they
// would a day before a real event.
func eventDay(now time.Time) time.Time {
	d := now.Add(72 * time.Hour).In(settlement.London)
	d = time.Date(d.Year(), d.Month(), d.Day(), 17, 30, 0, 0, settlement.London)
	for d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
		d = d.AddDate(0, 0, 1)
	}
	return d.UTC()
}

// mpan is the i-th MPAN of this suite (a valid check digit; one household per MPAN).
func mpan(i int) string {
	first12 := fmt.Sprintf("23%010d", i)
	return first12 + strconv.Itoa(validation.MPANCheckDigit(first12))
}

// sendHistory sends the charger's usual use on the twelve working days before start (the
// settlement's baseline) through POST /data/readings, as the organisation's readings flow.
func sendHistory(rest, chargerID string, start time.Time) {
	GinkgoHelper()
	history := make([]any, 0, 24)
	for back, n := 1, 0; n < 12; back++ {
		d := time.Date(start.Year(), start.Month(), start.Day()-back, 17, 30, 0, 0, settlement.London)
		if d.Weekday() == time.Saturday || d.Weekday() == time.Sunday {
			continue
		}
		for i, kwh := range usualKWh {
			at := d.Add(time.Duration(i) * 30 * time.Minute)
			history = append(history, map[string]any{"asset_id": chargerID, "label": usageLabel, "value": kwh,
				"start_timestamp": at.Format(time.RFC3339), "end_timestamp": at.Add(30 * time.Minute).Format(time.RFC3339)})
		}
		n++
	}
	status, answer := call(Default, "POST", "/data/readings", rest, map[string]any{"readings": history})
	Expect(status).To(Equal(http.StatusOK), "%v", answer)
	for _, r := range answer["responses"].([]any) {
		Expect(r).To(HaveKeyWithValue("accepted", true))
	}
}

// declare declares the flex event over the site through REST: its id.
func declare(rest, siteID string, start time.Time) string {
	GinkgoHelper()
	status, created := call(Default, "POST", "/flex-events", rest, map[string]any{"proposition": "limited_pause",
		"start_at": start.Format(time.RFC3339), "end_at": start.Add(time.Hour).Format(time.RFC3339),
		"direction": "turn_down", "rate_pence_per_kwh": ratePence, "site_ids": []any{siteID}})
	Expect(status).To(Equal(http.StatusCreated), "%v", created)
	return created["id"].(string)
}

// settled waits for the flex event to settle with the credit, and for the credit in the
// household's reward history.
func settled(rest, flexEvent, siteID string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		status, ev := call(g, "GET", "/flex-events/"+flexEvent, rest, nil)
		g.Expect(status).To(Equal(http.StatusOK), "%v", ev)
		g.Expect(ev).To(And(HaveKeyWithValue("status", "settled"), HaveKeyWithValue("credit_pence", BeNumerically("==", creditPence))))
	}).Should(Succeed())
	Eventually(func(g Gomega) {
		status, h := call(g, "GET", "/rewards/"+siteID+"/transactions", rest, nil)
		g.Expect(status).To(Equal(http.StatusOK), "%v", h)
		g.Expect(h["transactions"]).To(ConsistOf(HaveKeyWithValue("credit_pence", BeNumerically("==", creditPence))))
	}).Should(Succeed())
}

// dispatches polls the flex event's dispatch counts through REST.
func dispatches(rest, flexEvent string) func(g Gomega) map[string]any {
	return func(g Gomega) map[string]any {
		status, ev := call(g, "GET", "/flex-events/"+flexEvent, rest, nil)
		g.Expect(status).To(Equal(http.StatusOK), "%v", ev)
		counts, _ := ev["dispatches"].(map[string]any)
		return counts
	}
}

// readingsOf are the asset's stored readings in [from, to) by label, in time order.
func readingsOf(ctx context.Context, organisation, assetID string, from, to time.Time) map[string][]float64 {
	GinkgoHelper()
	rows, err := testDB.Pool.Query(ctx, `SELECT label, value FROM readings WHERE organisation = $1 AND asset_id = $2
		AND start_at >= $3 AND start_at < $4 ORDER BY label, start_at`, organisation, assetID, from, to)
	Expect(err).NotTo(HaveOccurred())
	defer rows.Close()
	out := map[string][]float64{}
	for rows.Next() {
		var label string
		var value float64
		Expect(rows.Scan(&label, &value)).To(Succeed())
		out[label] = append(out[label], value)
	}
	Expect(rows.Err()).NotTo(HaveOccurred())
	return out
}

// windowOf is the start of each of the event's intervals: its own period's, or the event's
// period's repeated (the document's rule for intervals without a period).
func windowOf(e ven.Event) []time.Time {
	GinkgoHelper()
	out := make([]time.Time, 0, len(e.Intervals))
	var next time.Time
	var step time.Duration
	if e.IntervalPeriod != nil {
		next, step = e.IntervalPeriod.Start, duration(e.IntervalPeriod.Duration)
	}
	for _, in := range e.Intervals {
		if in.IntervalPeriod != nil {
			next, step = in.IntervalPeriod.Start, duration(in.IntervalPeriod.Duration)
		}
		Expect(next.IsZero()).To(BeFalse(), "an interval with no period, in an event with none")
		out = append(out, next.UTC())
		next = next.Add(step)
	}
	return out
}

// duration reads the ISO 8601 durations Flexsite's events use (PTnH, PTnM, PTnS; absent: 0).
func duration(d *ven.Duration) time.Duration {
	GinkgoHelper()
	if d == nil {
		return 0
	}
	Expect(*d).To(HavePrefix("PT"), "a duration of hours, minutes and seconds")
	got, err := time.ParseDuration(strings.ToLower(strings.TrimPrefix(*d, "PT")))
	Expect(err).NotTo(HaveOccurred(), "%s", *d)
	return got
}

// payload is the interval's values of one payload type, as numbers.
func payload(in ven.Interval, payloadType string) []float64 {
	GinkgoHelper()
	var out []float64
	for _, p := range in.Payloads {
		if p.Type != payloadType {
			continue
		}
		for _, v := range p.Values {
			data, err := v.MarshalJSON()
			Expect(err).NotTo(HaveOccurred())
			var n float64
			Expect(json.Unmarshal(data, &n)).To(Succeed(), "a number: %s", data)
			out = append(out, n)
		}
	}
	return out
}

// valuesMap is a ValuesMap of one type with string or number values.
func valuesMap[T string | float32](typ string, values ...T) ven.ValuesMap {
	GinkgoHelper()
	m := ven.ValuesMap{Type: typ}
	for _, v := range values {
		var item ven.ValuesMap_Values_Item
		switch v := any(v).(type) {
		case string:
			Expect(item.FromValuesMapValues2(v)).To(Succeed())
		case float32:
			Expect(item.FromValuesMapValues0(v)).To(Succeed())
		}
		m.Values = append(m.Values, item)
	}
	return m
}

// texts is a ValuesMap's values as strings.
func texts(values []ven.ValuesMap_Values_Item) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		s, err := v.AsValuesMapValues2()
		if err != nil {
			return nil
		}
		out = append(out, s)
	}
	return out
}

// reportName is a report's name for an operating state.
func reportName(state string) string { return "operating-state-" + strings.ToLower(state) }

func ptr[T any](v T) *T { return &v }
