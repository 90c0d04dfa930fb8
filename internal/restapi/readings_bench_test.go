package restapi

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"testing"
	"time"
)

// BenchmarkReadReadings reads a well-formed batch of 2,000 readings into the use case's input, as
// POST /data/readings does before any database work.
func BenchmarkReadReadings(b *testing.B) {
	wire := make([]map[string]any, 2000)
	start := time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC)
	for i := range wire {
		s := start.Add(time.Duration(i) * time.Minute)
		wire[i] = map[string]any{"asset_id": "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e", "label": "boundary_import_kw",
			"value": float64(i%4000)/1000 - 1, "start_timestamp": s.Format(time.RFC3339),
			"end_timestamp": s.Add(time.Minute).Format(time.RFC3339)}
	}
	body, _ := json.Marshal(map[string]any{"readings": wire})
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := httptest.NewRequest("POST", "/data/readings", bytes.NewReader(body))
		in, _, err := readReadings(r)
		if err != nil {
			b.Fatal(err)
		}
		if len(in) != len(wire) {
			b.Fatalf("read %d readings of %d", len(in), len(wire))
		}
	}
}

// TestReadingsResponseEncoding: the answer's own encoder writes what encoding/json writes.
func TestReadingsResponseEncoding(t *testing.T) {
	r := ReadingsResponse{Responses: []ReadingResponse{
		{AssetID: "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e", StartTimestamp: "2026-04-14T17:00:00Z",
			EndTimestamp: "2026-04-14T17:30:00+01:00", Label: "boundary_import_kw", Accepted: true},
		{AssetID: "<x>&\"\\ é \u2028", StartTimestamp: "", EndTimestamp: "t", Label: `unknown "label"`,
			Error: `unknown label "x<y>"`},
	}}
	var want bytes.Buffer
	if err := json.NewEncoder(&want).Encode(r); err != nil {
		t.Fatal(err)
	}
	if got := r.AppendJSON(nil); string(got) != want.String() {
		t.Fatalf("AppendJSON = %s\nencoding/json = %s", got, want.String())
	}
	if got := (ReadingsResponse{Responses: []ReadingResponse{}}).AppendJSON(nil); string(got) != "{\"responses\":[]}\n" {
		t.Fatalf("empty: %s", got)
	}
}
