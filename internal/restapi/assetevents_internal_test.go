package restapi

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestAssetPairPattern: the external-id read and the asset's reads share one mux pattern; each
// request reaches its own handler with its own path value, under its documented pattern (which
// the access log and the metrics name).
func TestAssetPairPattern(t *testing.T) {
	var got string
	named := func(name, key string) http.Handler {
		return http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { got = name + " " + key + "=" + r.PathValue(key) })
	}
	mux := http.NewServeMux()
	mux.Handle("GET "+assetPairPattern, assetPairHandler(named("external", "external_id"),
		map[string]http.Handler{"intent": named("intent", "asset_id"), "price-curve": named("price-curve", "asset_id")}))
	const id = "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"
	for _, tc := range []struct{ path, want, pattern string }{
		{"/entities/asset/external-id/charger-1", "external external_id=charger-1", "GET /entities/asset/external-id/{external_id}"},
		{"/entities/asset/external-id/intent", "external external_id=intent", "GET /entities/asset/external-id/{external_id}"},
		{"/entities/asset/" + id + "/intent", "intent asset_id=" + id, "GET /entities/asset/{asset_id}/intent"},
		{"/entities/asset/" + id + "/price-curve", "price-curve asset_id=" + id, "GET /entities/asset/{asset_id}/price-curve"},
		{"/entities/asset/" + id + "/schedule", "", ""},
	} {
		got = ""
		r := httptest.NewRequest(http.MethodGet, tc.path, nil)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, r)
		if got != tc.want {
			t.Errorf("%s: reached %q, want %q", tc.path, got, tc.want)
		}
		if tc.want == "" && rec.Code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", tc.path, rec.Code)
		}
		if tc.pattern != "" && r.Pattern != tc.pattern {
			t.Errorf("%s: pattern %q, want %q", tc.path, r.Pattern, tc.pattern)
		}
	}
}
