package restapi

import (
	"net/http/httptest"
	"testing"

	"github.com/flexsite/flexsite/internal/app/dispatches"
	"github.com/flexsite/flexsite/internal/dispatchstore"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// FuzzDispatchCallbackBody fuzzes POST /entities/asset/{asset_id}/callback/{event_id}: its
// body (prod's EventResponse), the asset id and the event id, by API id or external id. The
// handler answers a well-formed 4xx (at "body", "path" or "query") before reading anything,
// exactly the one the field readers collect, or reaches the store to find the asset. Never a
// 500.
func FuzzDispatchCallbackBody(f *testing.F) {
	const asset = "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"
	for _, seed := range []struct {
		body, asset, event string
		external           bool
	}{
		{`{"timestamp": "2026-04-14T17:00:00Z", "status": "ACCEPTED"}`, asset, "0b7d5f8e-1c2d-4e3f-8a9b-0c1d2e3f4a5b", false},
		{`{"timestamp": "2026-04-14T17:00:00+01:00", "status": "EXECUTED"}`, "charger-1", "x", true},
		{`{"timestamp": "2026-04-14T17:00:00", "status": "accepted"}`, asset, "", false},
		{`{"timestamp": 1, "status": null}`, "not-a-uuid", "e", false},
		{`{"status": "CANCELLED"}`, asset, "e", false},
		{`{}`, "", "", true}, {`[]`, asset, "e", false}, {`not json`, asset, "e", false},
		{`{"timestamp": "yesterday", "status": "RECEIVED"} {}`, asset, "e", false},
	} {
		f.Add([]byte(seed.body), seed.asset, seed.event, seed.external)
	}
	a := fuzzAPI()
	a.Dispatches = dispatches.New(a.Households, &dispatchstore.Store{Pool: webtest.DownDatabase()})
	f.Fuzz(func(t *testing.T, body []byte, assetRef, event string, external bool) {
		target := "/?asset_id_is_external=false"
		if external {
			target = "/?asset_id_is_external=true"
		}
		r := jsonRequest(body)
		r.URL = httptest.NewRequest("POST", target, nil).URL
		r.SetPathValue("asset_id", assetRef)
		r.SetPathValue("event_id", event)
		_, err := a.dispatchCallback(r, fuzzPrincipal)
		got := checkAnswer(t, err, "body", "path", "query")

		// What the field readers say of the same input.
		fl := &fields{}
		if !external {
			pr := httptest.NewRequest("POST", "/", nil)
			pr.SetPathValue("asset_id", assetRef)
			fl.UUIDParam(pr, "asset_id")
		}
		obj, derr := web.DecodeObject(body)
		if derr != nil {
			sameAnswer(t, got, fl.Join(derr))
			return
		}
		parseEventResponse(fl, obj, fuzzNow)
		sameAnswer(t, got, fl.Err())
	})
}
