package ven_test

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/dispatch"
)

// The harness alone, with no VEN: a flex event walked through its window by the suite's clock
// is dispatched before it, reported through the REST callback, and settled after it from REST
// readings, to the same credit the walkthrough expects. When the walkthrough fails and this
// passes, the fault is in the OpenADR door, not in the harness.
var _ = Describe("The VEN suite's harness", func() {
	It("walks a flex event through its window by the clock: dispatched, reported and settled through REST", func(ctx SpecContext) {
		start := eventDay(time.Now())
		end := start.Add(time.Hour)
		setClock(ctx, start.Add(-2*time.Hour), "")
		o := newOrg(ctx)
		rest := o.restToken()
		siteID, chargerID := onboard(ctx, o, rest, mpan(2))
		sendHistory(rest, chargerID, start)
		flexEvent := declare(rest, siteID, start)
		Eventually(dispatches(rest, flexEvent)).Should(HaveKeyWithValue("requested", BeNumerically("==", 1)))

		callback := "/entities/asset/" + chargerID + "/callback/" + dispatch.EventID(o.Namespace, flexEvent, chargerID).String()
		status := func(s string) {
			GinkgoHelper()
			code, answer := call(Default, "POST", callback, rest, map[string]any{
				"timestamp": clock.Load().UTC().Format(time.RFC3339), "status": s})
			Expect(code).To(Equal(http.StatusOK), "%v", answer)
		}
		status("ACCEPTED")
		Eventually(dispatches(rest, flexEvent)).Should(HaveKeyWithValue("accepted", BeNumerically("==", 1)))
		setClock(ctx, start.Add(10*time.Minute), o.Namespace, flexEvent)
		status("EXECUTED")
		Eventually(dispatches(rest, flexEvent)).Should(HaveKeyWithValue("executed", BeNumerically("==", 1)))

		setClock(ctx, end.Add(5*time.Minute), "")
		readings := make([]any, 0, len(actualKWh))
		for i, kwh := range actualKWh {
			at := start.Add(time.Duration(i) * 30 * time.Minute)
			readings = append(readings, map[string]any{"asset_id": chargerID, "label": usageLabel, "value": kwh,
				"start_timestamp": at.Format(time.RFC3339), "end_timestamp": at.Add(30 * time.Minute).Format(time.RFC3339)})
		}
		code, answer := call(Default, "POST", "/data/readings", rest, map[string]any{"readings": readings})
		Expect(code).To(Equal(http.StatusOK), "%v", answer)
		setClock(ctx, end.Add(5*time.Minute), o.Namespace, flexEvent)
		settled(rest, flexEvent, siteID)
	})
})
