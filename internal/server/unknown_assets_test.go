package server_test

import (
	"fmt"
	"net/http"

	"github.com/google/uuid"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/flexsite/flexsite/internal/testenv"
)

// An unknown asset id costs a cache lookup, never an API-server request: a caller sending ids
// no asset has must not make the manager LIST the organisation's namespace once per id (the
// API server answers a label or field selector by scanning every object of the namespace).
var _ = Describe("Unknown asset ids", func() {
	It("answer 404 from the cache on every asset route, with no API-server request (100 ids)", func(ctx SpecContext) {
		needDatabase()
		o := newOrg(ctx)
		tok := o.token()
		// The organisation has a household, so the namespace is not empty.
		mustCall("POST", "/entities/site/onboard", tok, household("1200000000011"))

		window := map[string]any{"charging_schedule": []any{map[string]any{
			"start_timestamp": "2027-01-14T22:00:00Z", "end_timestamp": "2027-01-14T23:00:00Z"}}}
		callback := map[string]any{"timestamp": "2026-11-27T12:00:00Z", "status": "EXECUTED"}
		routes := []struct {
			method, path string
			body         any
		}{
			{"GET", "/entities/asset/%s", nil},
			{"PATCH", "/entities/asset/%s", map[string]any{"properties": map[string]any{"power_kw": 3.3}}},
			{"DELETE", "/entities/asset/%s", nil},
			{"GET", "/entities/asset/%s/intent", nil},
			{"GET", "/entities/asset/%s/battery-schedule", nil},
			{"GET", "/entities/asset/%s/price-curve", nil},
			{"POST", "/entities/asset/%s/event", map[string]any{"event_type": "plug_in"}},
			{"POST", "/entities/asset/%s/event/intent", map[string]any{"intent": map[string]any{
				"energy_required_kwh": 20, "ready_by": "2026-11-28T07:00:00Z"}}},
			{"POST", "/entities/asset/%s/event/plug-in-schedule", window},
			{"POST", "/entities/asset/%s/callback/" + uuid.NewString(), callback},
			{"POST", "/entities/asset/%s/callback/" + uuid.NewString() + "?asset_id_is_external=true", callback},
			{"GET", "/examples/ocpp-charging-profile?asset_id=%s", nil},
			{"GET", "/entities/asset/external-id/%s", nil},
		}
		tag := "unknown-assets-" + o.Namespace
		for i := range 100 {
			r := routes[i%len(routes)]
			path := fmt.Sprintf(r.path, uuid.NewString())
			status, resp, err := testenv.CallWithHeaders(apiServer.URL, r.method, path, tok, r.body,
				map[string]string{countHeader: tag})
			Expect(err).NotTo(HaveOccurred())
			Expect(status).To(Equal(http.StatusNotFound), "%s %s: %s", r.method, path, resp)
		}
		Expect(apiCallsOfVerb(tag, "list")).To(BeZero(), "LISTs of the namespace for unknown asset ids")
		Expect(apiCallsOf(tag)).To(BeZero(), "API-server requests for unknown asset ids")
	})

	It("still finds an asset the moment its creation is answered (the write waited for this replica's cache)", func(ctx SpecContext) {
		needDatabase()
		o := newOrg(ctx)
		tok := o.token()
		site := mustCall("POST", "/entities/site/onboard", tok, household("1300000000016"))
		siteID := site["site"].(map[string]any)["site_id"].(string)
		for i := range 5 {
			ext := fmt.Sprintf("fresh-%d-%s", i, o.Namespace)
			id := mustCall("POST", "/entities/asset", tok, map[string]any{"external_id": ext, "type": "charger",
				"site_id": siteID, "asset_model": "zappi"})["id"].(string)
			Expect(mustCall("GET", "/entities/asset/"+id, tok, nil)["id"]).To(Equal(id))
			Expect(mustCall("GET", "/entities/asset/external-id/"+ext, tok, nil)["id"]).To(Equal(id))
			mustCall("POST", "/entities/asset/"+id+"/event/plug-in", tok, map[string]any{})
		}
	})
})
