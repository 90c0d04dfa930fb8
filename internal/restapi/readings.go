package restapi

import (
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

// postReadings takes a batch of readings (the reference's ReadingsDataPoints, gzip accepted):
// a body that is not that schema is a 422 and stores nothing; otherwise each reading is
// accepted or rejected on its own (readings.Service.Ingest) and the answer says which.
func (a *API) postReadings(r *http.Request, p *auth.Principal) (any, error) {
	if a.Readings == nil {
		return nil, readings.ErrDatabaseUnavailable
	}
	body, err := web.DecodeJSONUpTo(r, MaxReadingsBodyBytes)
	if err != nil {
		return nil, err
	}
	f := &fields{}
	in, echo := parseReadings(f, body)
	if err := f.Err(); err != nil {
		return nil, err
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

// timestamp reads an ISO 8601 timestamp with its zone (empty: already reported missing).
func timestamp(f *fields, s string, loc []any, key string) time.Time {
	if s == "" {
		return time.Time{}
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
