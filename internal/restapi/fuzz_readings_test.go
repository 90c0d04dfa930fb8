package restapi

import (
	"bytes"
	"compress/gzip"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/go-logr/logr"

	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/web/webtest"
)

// FuzzReadingsBody fuzzes POST /data/readings' body, plain and gzip: the handler answers a
// well-formed 4xx (at ["body", ...]) without reading anything, or reaches the store to find
// the readings' assets, or answers every reading rejected (no asset it could look up, no
// reading stored: the store holds no asset). Never a 500, never a reading accepted.
func FuzzReadingsBody(f *testing.F) {
	const asset = "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e"
	for _, seed := range []string{
		`{"readings": [{"asset_id": "` + asset + `", "label": "boundary_import_kw", "value": -1.5,
			"start_timestamp": "2026-04-14T17:00:00Z", "end_timestamp": "2026-04-14T17:30:00+01:00"}]}`,
		`{"readings": [{"asset_id": "x", "label": "gas", "value": 1e999, "start_timestamp": "2026-04-14T17:00:00Z",
			"end_timestamp": "2026-04-14T16:00:00Z"}]}`,
		`{"readings": []}`,
		`{"readings": [{"asset_id": 1, "label": null, "value": "1", "start_timestamp": "2026-04-14T17:00:00",
			"end_timestamp": "yesterday"}, 7]}`,
		`{"readings": {}}`, `[]`, `not json`, `{"readings": [{}]} {}`, "",
	} {
		f.Add([]byte(seed), false)
		f.Add([]byte(seed), true)
	}
	a := fuzzAPI()
	store := webtest.UnreachableStore{}
	a.Readings = readings.New(readings.Config{Log: logr.Discard(), Cache: store, DB: webtest.DownDatabase(), Now: a.Now})
	f.Fuzz(func(t *testing.T, body []byte, compressed bool) {
		r := httptest.NewRequest(http.MethodPost, "/data/readings", bytes.NewReader(body))
		if compressed {
			var buf bytes.Buffer
			zw := gzip.NewWriter(&buf)
			_, _ = zw.Write(body)
			_ = zw.Close()
			r = httptest.NewRequest(http.MethodPost, "/data/readings", &buf)
			r.Header.Set("Content-Encoding", "gzip")
		}
		answer, err := a.postReadings(r, fuzzPrincipal)
		if err != nil {
			checkAnswer(t, err, "body")
			return
		}
		resp, ok := answer.(ReadingsResponse)
		if !ok {
			t.Fatalf("answered %T", answer)
		}
		for i, rr := range resp.Responses {
			// Every reading rejected; the reasons of the first MaxListedRejections told.
			if rr.Accepted || (rr.Error == "") != (i >= MaxListedRejections) {
				t.Fatalf("reading %d answered %+v with no asset to find", i, rr)
			}
		}
	})
}
