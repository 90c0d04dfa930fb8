package restapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
)

// MaxReadingsBodyBytes bounds the body of POST /data/readings, as decompressed: about 50,000
// readings. A larger body (or a gzip body that inflates past it) is a 413.
const MaxReadingsBodyBytes = 8 << 20

// ReadingsResponse answers POST /data/readings (the reference's ReadingsResponse): one
// response per reading sent, in the order sent.
type ReadingsResponse struct {
	Responses []ReadingResponse `json:"responses"`
}

// ReadingResponse is what became of one reading (the reference's ReadingResponse): the
// reading's asset, times and label as sent, whether it was accepted, and why not.
type ReadingResponse struct {
	AssetID        string `json:"asset_id"`
	StartTimestamp string `json:"start_timestamp"`
	EndTimestamp   string `json:"end_timestamp"`
	Label          string `json:"label"`
	Accepted       bool   `json:"accepted"`
	Error          string `json:"error,omitempty"`
}

// AppendJSON writes the answer as encoding/json would (web.Appender), without reflection: a
// batch's answer is as long as the batch.
func (r ReadingsResponse) AppendJSON(b []byte) []byte {
	b = append(b, `{"responses":[`...)
	for i, x := range r.Responses {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"asset_id":`...)
		b = appendJSONString(b, x.AssetID)
		b = append(b, `,"start_timestamp":`...)
		b = appendJSONString(b, x.StartTimestamp)
		b = append(b, `,"end_timestamp":`...)
		b = appendJSONString(b, x.EndTimestamp)
		b = append(b, `,"label":`...)
		b = appendJSONString(b, x.Label)
		b = append(b, `,"accepted":`...)
		b = strconv.AppendBool(b, x.Accepted)
		if x.Error != "" {
			b = append(b, `,"error":`...)
			b = appendJSONString(b, x.Error)
		}
		b = append(b, '}')
	}
	return append(b, "]}\n"...)
}

// postReadings takes a batch of readings (the reference's ReadingsDataPoints, gzip accepted):
// a body that is not that schema is a 422 and stores nothing; otherwise each reading is
// accepted or rejected on its own (readings.Service.Ingest) and the answer says which.
func (a *API) postReadings(r *http.Request, p *auth.Principal) (any, error) {
	if a.Readings == nil {
		return nil, readings.ErrDatabaseUnavailable
	}
	data, err := web.ReadBodyUpTo(r, MaxReadingsBodyBytes)
	if err != nil {
		return nil, err
	}
	in, echo, ok := readingsFast(data)
	if !ok {
		body, err := web.DecodeObject(data)
		if err != nil {
			return nil, err
		}
		f := &fields{}
		in, echo = parseReadings(f, body)
		if err := f.Err(); err != nil {
			return nil, err
		}
	}
	outcomes, err := a.Readings.Ingest(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	for i, o := range outcomes {
		echo[i].Accepted, echo[i].Error = o.Accepted, o.Error
	}
	return ReadingsResponse{Responses: echo}, nil
}

// parseReadings reads ReadingsDataPoints: every reading's fields present and of their types,
// its times ISO 8601 with a zone. What a reading's values mean (its asset, its label, its
// sign, its interval) is the use case's to judge, reading by reading. It answers the readings
// and, for each, its response with the fields as sent.
func parseReadings(f *fields, body map[string]any) ([]readings.Reading, []ReadingResponse) {
	loc := []any{"body"}
	items, ok := f.Array(body, loc, "readings", true)
	if !ok {
		return nil, nil
	}
	loc = at(loc, "readings")
	in := make([]readings.Reading, len(items))
	echo := make([]ReadingResponse, len(items))
	for i, item := range items {
		obj, ok := item.(map[string]any)
		itemLoc := at(loc, i)
		if !ok {
			f.Add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", itemLoc)
			continue
		}
		e := &echo[i]
		e.AssetID, _ = f.Str(obj, itemLoc, "asset_id", true)
		e.Label, _ = f.Str(obj, itemLoc, "label", true)
		e.StartTimestamp, _ = f.Str(obj, itemLoc, "start_timestamp", true)
		e.EndTimestamp, _ = f.Str(obj, itemLoc, "end_timestamp", true)
		in[i] = readings.Reading{AssetID: e.AssetID, Label: settlement.Label(e.Label),
			Start: timestamp(f, e.StartTimestamp, itemLoc, "start_timestamp"),
			End:   timestamp(f, e.EndTimestamp, itemLoc, "end_timestamp"),
			Value: readingValue(f, obj, itemLoc)}
	}
	return in, echo
}

// wireReading is a ReadingDataPoint as decoded straight into fields (readingsFast).
type wireReading struct {
	AssetID        *string    `json:"asset_id"`
	Label          *string    `json:"label"`
	StartTimestamp *string    `json:"start_timestamp"`
	EndTimestamp   *string    `json:"end_timestamp"`
	Value          wireNumber `json:"value"`
}

// wireNumber is a reading's value: a JSON number (one too large for a float64 reads as ±Inf);
// anything else is not one, which readingsFast leaves to parseReadings to report.
type wireNumber struct {
	value    float64
	isNumber bool
}

func (n *wireNumber) UnmarshalJSON(b []byte) error {
	if len(b) == 0 || (b[0] != '-' && (b[0] < '0' || b[0] > '9')) {
		*n = wireNumber{} // a string, true/false, null, an object or a list
		return nil
	}
	x, err := strconv.ParseFloat(string(b), 64)
	*n = wireNumber{value: x, isNumber: err == nil || errors.Is(err, strconv.ErrRange)}
	return nil
}

// readingsFast reads a well-formed body straight into the readings (no generic map per
// reading: the bulk of a batch's cost), and says false for anything it does not take
// whole — then parseReadings reads the body again, field by field, to name every problem.
// What it takes is what parseReadings takes. (encoding/json matches keys regardless of case,
// so "Asset_Id" is read as asset_id here: a leniency, never a refusal the other path makes
// of a well-formed body.)
func readingsFast(data []byte) ([]readings.Reading, []ReadingResponse, bool) {
	var body struct {
		Readings *[]wireReading `json:"readings"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&body); err != nil || dec.More() || body.Readings == nil {
		return nil, nil, false
	}
	wire := *body.Readings
	in := make([]readings.Reading, len(wire))
	echo := make([]ReadingResponse, len(wire))
	f := &fields{}
	for i, w := range wire {
		if w.AssetID == nil || w.Label == nil || w.StartTimestamp == nil || w.EndTimestamp == nil || !w.Value.isNumber ||
			!web.ValidText("asset_id", *w.AssetID) || !web.ValidText("label", *w.Label) ||
			!web.ValidText("start_timestamp", *w.StartTimestamp) || !web.ValidText("end_timestamp", *w.EndTimestamp) {
			return nil, nil, false
		}
		echo[i] = ReadingResponse{AssetID: *w.AssetID, Label: *w.Label, StartTimestamp: *w.StartTimestamp,
			EndTimestamp: *w.EndTimestamp}
		in[i] = readings.Reading{AssetID: *w.AssetID, Label: settlement.Label(*w.Label),
			Start: timestamp(f, *w.StartTimestamp, nil, ""), End: timestamp(f, *w.EndTimestamp, nil, ""), Value: w.Value.value}
		if len(f.Items()) > 0 {
			return nil, nil, false
		}
	}
	return in, echo, true
}

// timestamp reads an ISO 8601 timestamp with its zone (empty: already reported missing).
func timestamp(f *fields, s string, loc []any, key string) time.Time {
	if s == "" {
		return time.Time{}
	}
	// The usual form (RFC 3339: 2026-04-14T17:00:00Z, ...+01:00) through the standard
	// library's parser, which is many times faster than the general one; anything else (or
	// a year out of range in UTC) through validation's, which also says what is wrong.
	if len(s) <= len("2006-01-02T15:04:05.999999999+07:00") {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			if y := t.UTC().Year(); y >= 1 && y <= 9999 {
				return t
			}
		}
	}
	t, err := validation.ParseAwareTimestamp(s)
	if err != nil {
		f.AddValidation(err, at(loc, key))
	}
	return t
}

// readingValue reads a reading's value: a JSON number. One too large for a float64 reads as
// ±Inf, which the use case rejects as not finite (the reading alone, not the batch).
func readingValue(f *fields, obj map[string]any, loc []any) float64 {
	v, ok := f.Lookup(obj, loc, "value", true)
	if !ok {
		return 0
	}
	n, ok := v.(json.Number)
	if !ok {
		f.Add("Input should be a valid number", "float_type", at(loc, "value"))
		return 0
	}
	x, err := strconv.ParseFloat(string(n), 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		f.Add("Input should be a valid number", "float_type", at(loc, "value"))
	}
	return x
}
