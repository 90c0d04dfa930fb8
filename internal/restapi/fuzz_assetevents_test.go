package restapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/flexsite/flexsite/internal/app/assetevents"
	"github.com/flexsite/flexsite/internal/asseteventstore"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// FuzzAssetEventBodies fuzzes the asset events' bodies on each of their routes: the handler
// answers a well-formed 4xx (at ["path", ...] or ["body", ...]) without reading anything, or
// reaches the store to find the asset. Never a 500, never an event kept without its asset.
func FuzzAssetEventBodies(f *testing.F) {
	const asset = "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"
	routes := []string{"", "/plug-in", "/plug-out", "/intent", "/charge-now", "/charge-now-deleted", "/tariff-update"}
	for i := range routes {
		for _, seed := range []string{
			`{"event_type": "plug_in", "intent": {"energy_required_kwh": 20, "ready_by": "2026-11-28T07:30:00Z",
				"ready_by_local_time": "07:30", "charging_mode": "minimise_charging_time", "may_charge_peak": true},
				"vehicle": {"charging_rate_kw": 7.4}, "tariff": {"off_peak_times": "00:00-05:30, 23:30-24:00",
				"timezone": "Europe/London", "tariff_type": "dual_rate"}}`,
			`{"event_type": "charge_now", "end_at": "2026-11-28T09:00:00Z"}`,
			`{"intent": {"energy_required_kwh": -1, "ready_by": "tomorrow", "ready_by_local_time": "25:00"}}`,
			`{"tariff": {"off_peak_times": "Mo-Fr 00:00-07:00", "timezone": "Europe/Narnia", "tariff_type": "cheap"}}`,
			`{"end_at": "2026-11-28T09:00:00"}`, `{}`, `[]`, `not json`, "",
		} {
			f.Add(uint8(i), asset, []byte(seed))
		}
	}
	f.Add(uint8(1), "not-a-uuid", []byte(`{}`))
	a := fuzzAPI()
	a.AssetEvents = assetevents.New(a.Households, &asseteventstore.Store{Pool: webtest.DownDatabase()})
	handlers := map[string]func(*http.Request) (any, error){}
	for _, r := range a.Routes() {
		for _, route := range routes {
			if r.Method == http.MethodPost && r.Path == assetEventRoute+route {
				handlers[route] = func(req *http.Request) (any, error) {
					// The route's own handler, past the guard (the principal is the fuzz organisation's).
					return a.assetEventHandler(route)(req, fuzzPrincipal)
				}
			}
		}
	}
	if len(handlers) != len(routes) {
		f.Fatalf("found %d of the %d asset event routes", len(handlers), len(routes))
	}
	f.Fuzz(func(t *testing.T, route uint8, assetID string, body []byte) {
		path := routes[int(route)%len(routes)]
		r := httptest.NewRequest(http.MethodPost, "/entities/asset/x/event"+path, bytes.NewReader(body))
		r.SetPathValue("asset_id", assetID)
		answer, err := handlers[path](r)
		if err == nil {
			t.Fatalf("answered %v without finding the asset", answer)
		}
		checkAnswer(t, err, "path", "body")
	})
}
