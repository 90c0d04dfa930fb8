package restapi

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/web"
)

// readingsBody is a request of POST /data/readings with body, gzip'd when asked.
func readingsBody(t *testing.T, body string, compressed bool) ([]byte, bool) {
	t.Helper()
	if !compressed {
		return []byte(body), false
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write([]byte(body)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), true
}

func sendReadings(t *testing.T, body string, compressed bool) (int, error) {
	t.Helper()
	data, gz := readingsBody(t, body, compressed)
	r := httptest.NewRequest("POST", "/data/readings", bytes.NewReader(data))
	if gz {
		r.Header.Set("Content-Encoding", "gzip")
	}
	in, echo, err := readReadings(r)
	if err == nil && len(in) != len(echo) {
		t.Fatalf("%d readings, %d responses", len(in), len(echo))
	}
	return len(in), err
}

const goodReading = `{"asset_id": "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e", "label": "boundary_import_kw", "value": -1.5,
	"start_timestamp": "2026-04-14T17:00:00Z", "end_timestamp": "2026-04-14T17:30:00+01:00"}`

func repeat(item string, n int) string {
	return `{"readings": [` + strings.TrimSuffix(strings.Repeat(item+",", n), ",") + `]}`
}

// TestReadReadingsBounded: the readings are read as a stream, at most MaxReadingsPerRequest of
// them (413 found there), and a 422 names the problems of the first MaxListedRejections
// rejected readings only, counting the rest.
func TestReadReadingsBounded(t *testing.T) {
	// The body: 2.7 million empty readings, 8.1 MB, ~8 KB gzip'd.
	bomb := `{"readings":[` + strings.TrimSuffix(strings.Repeat("{},", 2_700_000), ",") + `]}`
	for _, gz := range []bool{false, true} {
		_, err := sendReadings(t, bomb, gz)
		if e := app.As(err); e == nil || e.Kind != app.TooLarge || !strings.Contains(fmt.Sprint(e.Detail), "10000 readings") {
			t.Fatalf("gzip %v: 2.7 million empty readings answered %v, want 413 naming the maximum", gz, err)
		}
	}
	if n, err := sendReadings(t, repeat(goodReading, MaxReadingsPerRequest), true); err != nil || n != MaxReadingsPerRequest {
		t.Fatalf("the maximum: %d readings, %v", n, err)
	}
	if _, err := sendReadings(t, repeat(goodReading, MaxReadingsPerRequest+1), false); app.As(err) == nil || app.As(err).Kind != app.TooLarge {
		t.Fatalf("one past the maximum: %v, want 413", err)
	}

	// 150 empty readings: five problems each for the first 100, the other 50 counted.
	_, err := sendReadings(t, repeat("{}", 150), false)
	e := app.As(err)
	if e == nil || e.Kind != app.Invalid {
		t.Fatalf("150 empty readings: %v, want 422", err)
	}
	items := e.Detail.([]app.FieldError)
	if len(items) != 5*MaxListedRejections+1 {
		t.Fatalf("%d problems listed, want %d", len(items), 5*MaxListedRejections+1)
	}
	last := items[len(items)-1]
	if last.Type != "too_many_errors" || last.Msg != "50 more rejected readings, not listed" ||
		fmt.Sprint(last.Loc) != "[body readings]" {
		t.Fatalf("last item %+v", last)
	}
	if fmt.Sprint(items[0].Loc) != "[body readings 0 asset_id]" || fmt.Sprint(items[499].Loc) != "[body readings 99 value]" {
		t.Fatalf("items %+v ... %+v", items[0], items[499])
	}
}

// TestReadReadingsProblems: each kind of problem is named where it is, as before the stream.
func TestReadReadingsProblems(t *testing.T) {
	cases := []struct {
		body string
		want string // the 422's items, "loc type" each
	}{
		{`[]`, "[body] model_attributes_type"},
		{`{}`, "[body readings] missing"},
		{`{"readings": {"a": [1]}}`, "[body readings] list_type"},
		{`{"readings": [null, 7, [], "x"]}`, "[body readings 0] model_attributes_type;[body readings 1] model_attributes_type;" +
			"[body readings 2] model_attributes_type;[body readings 3] model_attributes_type"},
		{`{"readings": [{"asset_id": 1, "label": null, "value": "1", "start_timestamp": "2026-04-14T17:00:00",
			"end_timestamp": "2026-04-14T17:30:00Z"}]}`,
			"[body readings 0 asset_id] string_type;[body readings 0 label] missing;[body readings 0 start_timestamp] " +
				"timezone_aware;[body readings 0 value] float_type"},
		{`{"readings": [{"asset_id": {"x": "}"}, "label": ["]"], "value": true, "start_timestamp": " ",
			"end_timestamp": "2026-04-14T17:30:00Z", "extra": {"deep": [1, 2, {"a": "\""}]}}]}`,
			"[body readings 0 asset_id] string_type;[body readings 0 label] string_type;" +
				"[body readings 0 start_timestamp] string_too_short;[body readings 0 value] float_type"},
		{`{"readings": [{}]} {}`, "[body 19] json_invalid"},
		// Shaped as every JSON body (web.JSONShaped), read as a stream: a key twice, a text
		// that is not UTF-8, a reading nested past web.MaxDepth (at the byte that opens it).
		{`{"readings": [{}], "readings": []}`, "[body readings] duplicate_key"},
		{`{"readings": [{"asset_id": "a", "value": 1, "asset_id": "b"}]}`, "[body readings 0 asset_id] duplicate_key"},
		{"{\"readings\": [{\"label\": \"\xff\"}]}", "[body 25] json_invalid"},
		{`{"readings": [{"x": ` + strings.Repeat("[", 1_000_000), fmt.Sprintf("[body %d] json_invalid", 20+web.MaxDepth-3)},
		{`{"readings": [{}]`, "[body 0] json_invalid"},
	}
	for _, c := range cases {
		_, err := sendReadings(t, c.body, false)
		e := app.As(err)
		if e == nil || e.Kind != app.Invalid {
			t.Fatalf("%s: %v, want 422", c.body, err)
		}
		var got []string
		for _, it := range e.Detail.([]app.FieldError) {
			got = append(got, fmt.Sprint(it.Loc)+" "+it.Type)
		}
		if strings.Join(got, ";") != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.body, strings.Join(got, ";"), c.want)
		}
	}
	// Well formed: escapes, unicode, keys in any order, other keys.
	n, err := sendReadings(t, `{"other": [1, {"readings": []}], "readings": [{"value": 1e999, "label": "boundary_import_kw",
		"asset_id": "8f14e45f-ceea-467a-9af0-6b1f2a3c4d5e", "start_timestamp": "2026-04-14T17:00:00\u005a",
		"end_timestamp": "2026-04-14T17:30:00Z", "note": "é"}, `+goodReading+`]}`, true)
	if err != nil || n != 2 {
		t.Fatalf("well formed: %d, %v", n, err)
	}
}
