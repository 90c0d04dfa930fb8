package restapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/app/readings"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/settlement"
	"github.com/flexsite/flexsite/internal/validation"
	"github.com/flexsite/flexsite/internal/web"
	"github.com/flexsite/flexsite/internal/web/jsonappend"
)

// MaxReadingsBodyBytes bounds the body of POST /data/readings, as decompressed. A larger
// body (or a gzip body that inflates past it) is a 413.
const MaxReadingsBodyBytes = 8 << 20

// MaxReadingsPerRequest is how many readings one POST /data/readings may send (docs/api.md):
// the body is read as a stream and the reading past it is a 413, found there, the rest never
// read. A request's memory is bounded by it, not by what a small body expands to (a gzip body
// of 8 KB inflates to millions of empty readings).
const MaxReadingsPerRequest = 10_000

// MaxListedRejections is how many rejected readings an answer names the reasons of: the
// first ones sent. The rest are counted (ReadingsResponse.ErrorsNotListed; in a 422, one last
// item of type too_many_errors).
const MaxListedRejections = 100

// ReadingsResponse answers POST /data/readings (the reference's ReadingsResponse): one
// response per reading sent, in the order sent.
type ReadingsResponse struct {
	Responses []ReadingResponse `json:"responses"`
	// ErrorsNotListed counts the rejected readings past the first MaxListedRejections, whose
	// responses say accepted false without their error (Flexsite's; absent when none).
	ErrorsNotListed int `json:"errors_not_listed,omitempty"`
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
		b = jsonappend.String(b, x.AssetID)
		b = append(b, `,"start_timestamp":`...)
		b = jsonappend.String(b, x.StartTimestamp)
		b = append(b, `,"end_timestamp":`...)
		b = jsonappend.String(b, x.EndTimestamp)
		b = append(b, `,"label":`...)
		b = jsonappend.String(b, x.Label)
		b = append(b, `,"accepted":`...)
		b = strconv.AppendBool(b, x.Accepted)
		if x.Error != "" {
			b = append(b, `,"error":`...)
			b = jsonappend.String(b, x.Error)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if r.ErrorsNotListed > 0 {
		b = append(b, `,"errors_not_listed":`...)
		b = strconv.AppendInt(b, int64(r.ErrorsNotListed), 10)
	}
	return append(b, "}\n"...)
}

// postReadings takes a batch of readings (the reference's ReadingsDataPoints, gzip accepted):
// a body that is not that schema is a 422 and stores nothing; otherwise each reading is
// accepted or rejected on its own (readings.Service.Ingest) and the answer says which.
func (a *API) postReadings(r *http.Request, p *auth.Principal) (any, error) {
	in, echo, err := readReadings(r)
	if err != nil {
		return nil, err
	}
	outcomes, err := a.Readings.Ingest(r.Context(), p, in)
	if err != nil {
		return nil, err
	}
	resp := ReadingsResponse{Responses: echo}
	listed := 0
	for i, o := range outcomes {
		echo[i].Accepted = o.Accepted
		switch {
		case o.Accepted:
		case listed < MaxListedRejections:
			echo[i].Error = o.Error
			listed++
		default:
			resp.ErrorsNotListed++
		}
	}
	return resp, nil
}

// readReadings reads ReadingsDataPoints from the body as a stream (encoding/json's tokens
// around the readings, each reading decoded on its own), shaped as every JSON body is
// (web.JSONShaped): nothing of the body is held but the readings taken. It answers the readings and, for each, its response with the fields as
// sent; or the refusal: 413 past MaxReadingsPerRequest readings or MaxReadingsBodyBytes, 422
// naming the problems of the first MaxListedRejections readings that have any (and counting
// the rest), json_invalid for a body that is not JSON.
func readReadings(r *http.Request) ([]readings.Reading, []ReadingResponse, error) {
	body, closeBody, err := web.OpenBodyUpTo(r, MaxReadingsBodyBytes)
	if err != nil {
		return nil, nil, err
	}
	defer closeBody()
	// Shaped: the decoder never reads a body nested past web.MaxDepth, a key twice, or a text
	// that is not UTF-8 (each a 422, as every JSON body's).
	rd := readingsReader{dec: json.NewDecoder(web.JSONShaped(body))}
	in, echo, err := rd.read()
	if err != nil {
		if told := web.BodyError(err, MaxReadingsBodyBytes); told != nil {
			return nil, nil, told
		}
		if app.As(err) != nil {
			return nil, nil, err
		}
		return nil, nil, app.InvalidFields(app.Field("JSON decode error", "json_invalid", "body", jsonOffset(err)))
	}
	return in, echo, nil
}

// readingsReader reads one body of readings.
type readingsReader struct {
	dec *json.Decoder
	// f holds the problems listed: those of the first MaxListedRejections readings that have
	// any, and the body's own.
	f fields
	// rejected counts the readings that have problems.
	rejected int
}

// read reads the body: an error that is not an app.Error is the decoder's or the body's.
func (rd *readingsReader) read() ([]readings.Reading, []ReadingResponse, error) {
	// A reading has at most seven problems; the body's own are a few.
	rd.f.Limit = 8*MaxListedRejections + 8
	tok, err := rd.dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if tok != json.Delim('{') {
		if err := skipRest(rd.dec, tok); err != nil {
			return nil, nil, err
		}
		if err := rd.end(); err != nil {
			return nil, nil, err
		}
		return nil, nil, app.InvalidFields(app.Field("Input should be a valid dictionary or object to extract fields from",
			"model_attributes_type", "body"))
	}
	var in []readings.Reading
	var echo []ReadingResponse
	seen := false
	for rd.dec.More() {
		key, err := rd.dec.Token()
		if err != nil {
			return nil, nil, err
		}
		if key != readingsKey {
			var skip json.RawMessage
			if err := rd.dec.Decode(&skip); err != nil {
				return nil, nil, err
			}
			continue
		}
		seen = true // (once: a key sent twice is refused as the body is read, web.JSONShaped)
		if in, echo, err = rd.list(); err != nil {
			return nil, nil, err
		}
	}
	if _, err := rd.dec.Token(); err != nil { // the closing brace
		return nil, nil, err
	}
	if err := rd.end(); err != nil {
		return nil, nil, err
	}
	if !seen {
		rd.f.Add("Field required", "missing", readingsLoc())
	}
	if rd.rejected > MaxListedRejections {
		rd.f.Unlisted(rd.rejected-MaxListedRejections, "rejected readings", readingsLoc())
	}
	if err := rd.f.Err(); err != nil {
		return nil, nil, err
	}
	return in, echo, nil
}

// readingsKey is the body's one field: the list of readings.
const readingsKey = "readings"

// readingsLoc is where the list is, in a 422.
func readingsLoc() []any { return []any{"body", readingsKey} }

// end checks that nothing but white space follows the body's object.
func (rd *readingsReader) end() error {
	rd.dec.More() // past the white space: the offset is where the extra data starts
	offset := rd.dec.InputOffset()
	if _, err := rd.dec.Token(); err != io.EOF {
		if err == nil || errors.As(err, new(*json.SyntaxError)) {
			return app.InvalidFields(app.Field("JSON decode error: extra data after the object", "json_invalid", "body",
				offset))
		}
		return err
	}
	return nil
}

// list reads the readings list, reading by reading.
func (rd *readingsReader) list() ([]readings.Reading, []ReadingResponse, error) {
	loc := readingsLoc()
	tok, err := rd.dec.Token()
	if err != nil {
		return nil, nil, err
	}
	if tok != json.Delim('[') {
		if err := skipRest(rd.dec, tok); err != nil {
			return nil, nil, err
		}
		rd.f.Add("Input should be a valid list", "list_type", loc)
		return nil, nil, nil
	}
	var in []readings.Reading
	var echo []ReadingResponse
	var w wireReading
	var scratch, times fields
	for i := 0; rd.dec.More(); i++ {
		if i == MaxReadingsPerRequest {
			return nil, nil, app.Fail(app.TooLarge, "More than %d readings in one request: send at most %d a request",
				MaxReadingsPerRequest, MaxReadingsPerRequest)
		}
		if err := rd.dec.Decode(&w); err != nil {
			return nil, nil, err
		}
		var reading readings.Reading
		var e ReadingResponse
		ok := w.isObject
		if ok {
			reading, e, ok = w.take(&times)
		}
		if !ok {
			// Named field by field, as parseReading reads a reading: into the answer for
			// the first rejected readings, counted for the rest.
			f := &rd.f
			if rd.rejected >= MaxListedRejections {
				scratch = fields{}
				f = &scratch
			}
			before := len(f.Items())
			itemLoc := at(loc, i)
			if !w.isObject {
				f.Add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", itemLoc)
			} else {
				reading, e = parseReading(f, w.object(), itemLoc)
			}
			if len(f.Items()) > before {
				rd.rejected++
			}
		}
		in, echo = append(in, reading), append(echo, e)
	}
	if _, err := rd.dec.Token(); err != nil { // the closing bracket
		return nil, nil, err
	}
	if in == nil {
		in, echo = []readings.Reading{}, []ReadingResponse{}
	}
	return in, echo, nil
}

// skipRest reads the rest of a value whose first token was tok.
func skipRest(dec *json.Decoder, tok json.Token) error {
	d, ok := tok.(json.Delim)
	if !ok || (d != '{' && d != '[') {
		return nil
	}
	for dec.More() {
		if d == '{' {
			if _, err := dec.Token(); err != nil {
				return err
			}
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return err
		}
	}
	_, err := dec.Token()
	return err
}

func jsonOffset(err error) int64 {
	if syntax, ok := errors.AsType[*json.SyntaxError](err); ok {
		return syntax.Offset
	}
	return 0
}

// parseReading reads one ReadingDataPoint: every field present and of its type, its times
// ISO 8601 with a zone. What a reading's values mean (its asset, its label, its sign, its
// interval) is the use case's to judge, reading by reading. It answers the reading and its
// response with the fields as sent.
func parseReading(f *fields, obj map[string]any, loc []any) (readings.Reading, ReadingResponse) {
	var e ReadingResponse
	e.AssetID, _ = f.Str(obj, loc, "asset_id", true)
	e.Label, _ = f.Str(obj, loc, "label", true)
	e.StartTimestamp, _ = f.Str(obj, loc, "start_timestamp", true)
	e.EndTimestamp, _ = f.Str(obj, loc, "end_timestamp", true)
	return readings.Reading{AssetID: e.AssetID, Label: settlement.Label(e.Label),
		Start: timestamp(f, e.StartTimestamp, loc, "start_timestamp"),
		End:   timestamp(f, e.EndTimestamp, loc, "end_timestamp"),
		Value: readingValue(f, obj, loc)}, e
}

// wireReading is a ReadingDataPoint as decoded straight into fields, no generic map per
// reading (the bulk of a batch's cost): the decoder has checked the reading is JSON and hands
// over its bytes (UnmarshalJSON), which are read by hand, without reflection. Keys match as
// the reference's schema names them (case and all).
type wireReading struct {
	// isObject is false for a reading that is not a JSON object (null, a list, a text ...).
	isObject                                            bool
	AssetID, Label, StartTimestamp, EndTimestamp, Value wireValue
}

// UnmarshalJSON reads one reading, b being a whole JSON value already checked by the decoder.
func (w *wireReading) UnmarshalJSON(b []byte) error {
	*w = wireReading{}
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return nil
	}
	w.isObject = true
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) || b[i] == '}' {
			return nil
		}
		if b[i] == ',' {
			i = skipSpace(b, i+1)
		}
		keyStart := i
		i = endOfString(b, i)
		key := b[keyStart:i]
		i = skipSpace(b, i) + 1 // the colon
		i = skipSpace(b, i)
		valueStart := i
		i = endOfValue(b, i)
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if err := json.Unmarshal(key, &k); err != nil {
				return err
			}
			key = []byte(strconv.Quote(k))
		}
		var field *wireValue
		switch string(key) {
		case `"asset_id"`:
			field = &w.AssetID
		case `"label"`:
			field = &w.Label
		case `"start_timestamp"`:
			field = &w.StartTimestamp
		case `"end_timestamp"`:
			field = &w.EndTimestamp
		case `"value"`:
			field = &w.Value
		default:
			continue
		}
		if err := field.UnmarshalJSON(b[valueStart:i]); err != nil {
			return err
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// endOfString is the index after the JSON string that starts at b[i].
func endOfString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return len(b)
}

// endOfValue is the index after the JSON value that starts at b[i] (b is valid JSON).
func endOfValue(b []byte, i int) int {
	if i >= len(b) {
		return i
	}
	switch b[i] {
	case '"':
		return endOfString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = endOfString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\t' && b[j] != '\n' && b[j] != '\r' {
		j++
	}
	return j
}

// wireValue is one field of a reading as sent: its JSON kind and, for a string, its text; for
// a number, its value (one too large for a float64 reads as ±Inf).
type wireValue struct {
	kind   byte // 0: absent; 'n' null, '"' string, '0' number, 't' boolean, '{' object, '[' list
	text   string
	number float64
}

func (v *wireValue) UnmarshalJSON(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	switch c := b[0]; c {
	case '"':
		v.kind = '"'
		if s, ok := plainString(b); ok {
			v.text = s
			return nil
		}
		return json.Unmarshal(b, &v.text)
	case 'n':
		v.kind = 'n'
	case 't', 'f':
		v.kind = 't'
	case '{', '[':
		v.kind = c
	default:
		x, err := strconv.ParseFloat(string(b), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return err
		}
		v.kind, v.number = '0', x
	}
	return nil
}

// plainString is a JSON string's text when it has no escape and only ASCII (a reading's ids,
// labels and times): the bytes between its quotes.
func plainString(b []byte) (string, bool) {
	if len(b) < 2 {
		return "", false
	}
	inner := b[1 : len(b)-1]
	for _, c := range inner {
		if c == '\\' || c >= utf8.RuneSelf {
			return "", false
		}
	}
	return string(inner), true
}

// take is the reading when every field is there and of its type, each text what web.Fields
// takes and the times readable; false for anything else, which parseReading then names.
// (scratch collects what the times' parser says of them, and is emptied again.)
func (w *wireReading) take(scratch *fields) (readings.Reading, ReadingResponse, bool) {
	if w.AssetID.kind != '"' || w.Label.kind != '"' || w.StartTimestamp.kind != '"' || w.EndTimestamp.kind != '"' ||
		w.Value.kind != '0' ||
		!web.ValidText("asset_id", w.AssetID.text) || !web.ValidText("label", w.Label.text) ||
		!web.ValidText("start_timestamp", w.StartTimestamp.text) || !web.ValidText("end_timestamp", w.EndTimestamp.text) {
		return readings.Reading{}, ReadingResponse{}, false
	}
	before := len(scratch.Items())
	r := readings.Reading{AssetID: w.AssetID.text, Label: settlement.Label(w.Label.text),
		Start: timestamp(scratch, w.StartTimestamp.text, nil, ""), End: timestamp(scratch, w.EndTimestamp.text, nil, ""),
		Value: w.Value.number}
	if len(scratch.Items()) > before {
		*scratch = fields{}
		return readings.Reading{}, ReadingResponse{}, false
	}
	return r, ReadingResponse{AssetID: w.AssetID.text, Label: w.Label.text, StartTimestamp: w.StartTimestamp.text,
		EndTimestamp: w.EndTimestamp.text}, true
}

// object is the reading as a decoded object holds it, for parseReading to name its problems:
// the texts as sent, a number as its value, anything else as an empty one of its kind.
func (w *wireReading) object() map[string]any {
	obj := map[string]any{}
	for _, field := range []struct {
		key string
		v   *wireValue
	}{{"asset_id", &w.AssetID}, {"label", &w.Label}, {"start_timestamp", &w.StartTimestamp},
		{"end_timestamp", &w.EndTimestamp}, {"value", &w.Value}} {
		switch field.v.kind {
		case '"':
			obj[field.key] = field.v.text
		case '0':
			obj[field.key] = json.Number(strconv.FormatFloat(field.v.number, 'g', -1, 64))
		case 't':
			obj[field.key] = true
		case '{':
			obj[field.key] = map[string]any{}
		case '[':
			obj[field.key] = []any{}
		}
	}
	return obj
}

// timestamp reads an ISO 8601 timestamp with its zone (empty: already reported missing).
func timestamp(f *fields, s string, loc []any, key string) time.Time {
	if s == "" {
		return time.Time{}
	}
	// The usual form (RFC 3339: 2026-04-14T17:00:00Z, ...+01:00) through the standard
	// library's parser, which is many times faster than the general one; anything else (or
	// a time out of the supported range) through validation's, which also says what is wrong.
	if len(s) <= len("2006-01-02T15:04:05.999999999+07:00") {
		if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
			if validation.TimeInRange(t) == nil {
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
