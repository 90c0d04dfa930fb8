package web

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/units"
	"github.com/flexsite/flexsite/internal/validation"
)

// MaxBodyBytes bounds a request body; larger bodies are refused with 413.
const MaxBodyBytes = 1 << 20

// DecodeJSON reads a JSON object body. Malformed JSON or a body that is not an object is a 422
// (json_invalid / model_attributes_type), never a 500.
func DecodeJSON(r *http.Request) (map[string]any, error) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, app.Fail(app.TooLarge, "Request body larger than %d bytes", MaxBodyBytes)
		}
		return nil, app.Fail(app.BadRequest, "Could not read the request body")
	}
	return DecodeObject(data)
}

// DecodeJSONUpTo is DecodeJSON for a body of up to limit bytes, sent as it is or compressed
// (Content-Encoding: gzip). The bound holds on the body as decompressed too: a small body
// that inflates past it (a gzip bomb) is refused with 413 as soon as it does, never read
// whole. Another encoding is a 415; a body that is not gzip as it says is a 400.
func DecodeJSONUpTo(r *http.Request, limit int64) (map[string]any, error) {
	data, err := ReadBodyUpTo(r, limit)
	if err != nil {
		return nil, err
	}
	return DecodeObject(data)
}

// ReadBodyUpTo reads a body of up to limit bytes, decompressed when Content-Encoding says gzip
// (the bound holds on both sides of the decompression).
func ReadBodyUpTo(r *http.Request, limit int64) ([]byte, error) {
	body, closeBody, err := OpenBodyUpTo(r, limit)
	if err != nil {
		return nil, err
	}
	defer closeBody()
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n))
	}
	if _, err := buf.ReadFrom(body); err != nil {
		if err := BodyError(err, limit); err != nil {
			return nil, err
		}
		return nil, app.Fail(app.BadRequest, "Could not read the request body")
	}
	return buf.Bytes(), nil
}

// OpenBodyUpTo is the body of up to limit bytes as a stream, decompressed when
// Content-Encoding says gzip: reading past limit bytes, on either side of the decompression,
// fails with an error that BodyError tells as 413. A reader that decodes as it reads (a JSON
// stream) holds what it keeps, never the body. The caller closes it when done.
func OpenBodyUpTo(r *http.Request, limit int64) (io.Reader, func(), error) {
	var body io.Reader = http.MaxBytesReader(nil, r.Body, limit)
	closeBody := func() {}
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
				return nil, nil, tooLarge(limit)
			}
			return nil, nil, app.Fail(app.BadRequest, "The request body is not gzip, as its Content-Encoding says")
		}
		closeBody = func() { _ = zr.Close() }
		body = &inflatedUpTo{r: zr, left: limit}
	default:
		return nil, nil, &Error{Status: http.StatusUnsupportedMediaType,
			Detail: fmt.Sprintf("Content-Encoding %q is not supported: send the body as it is, or gzip", enc)}
	}
	return body, closeBody, nil
}

// inflatedUpTo reads a decompressed body up to its limit: one byte more is a
// *http.MaxBytesError, as on the wire.
type inflatedUpTo struct {
	r    io.Reader
	left int64
}

func (l *inflatedUpTo) Read(p []byte) (int, error) {
	if l.left < 0 {
		return 0, &http.MaxBytesError{}
	}
	if int64(len(p)) > l.left+1 {
		p = p[:l.left+1]
	}
	n, err := l.r.Read(p)
	l.left -= int64(n)
	if l.left < 0 {
		return n, &http.MaxBytesError{}
	}
	if err != nil && err != io.EOF {
		if _, ok := errors.AsType[*http.MaxBytesError](err); !ok {
			err = notGzipError{err}
		}
	}
	return n, err
}

// notGzipError is the decompressor's refusal of a body: told apart from a JSON decoder's
// own io.ErrUnexpectedEOF (a document cut short) that reads it.
type notGzipError struct{ err error }

func (e notGzipError) Error() string { return "not gzip: " + e.err.Error() }
func (e notGzipError) Unwrap() error { return e.err }

func tooLarge(limit int64) error {
	return app.Fail(app.TooLarge, "Request body larger than %d bytes", limit)
}

// BodyError tells the error of reading a body opened by OpenBodyUpTo (a decoder's, when it is
// the reader's): past the limit, 413; not the gzip it says, 400; nil when err is not one of
// the reader's: a decoder's own (a syntax error, a document cut short) or the connection's,
// for the caller to tell. A JSONShaped reader's refusal is its 422.
func BodyError(err error, limit int64) error {
	if shape, ok := errors.AsType[shapeError](err); ok { // a JSONShaped body's refusal
		return shape.err
	}
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return tooLarge(limit)
	}
	if _, ok := errors.AsType[notGzipError](err); ok {
		return app.Fail(app.BadRequest, "The request body is not gzip, as its Content-Encoding says")
	}
	return nil
}

// MaxListItems bounds every list a JSON body holds (the readings of POST /data/readings
// excepted: they are streamed, up to restapi.MaxReadingsPerRequest). A route's own maximum
// may be lower (assets: app.MaxAssetsPerCall), never higher. A longer list is refused where it
// is in the body (422, too_long) as soon as the decoder reaches the item past the bound: a
// body of a million empty items is never held, nor judged item by item.
const MaxListItems = 1000

// DecodeObject decodes a JSON object body already read, as DecodeJSON does: every list in it
// at most MaxListItems long, and of the shape checkJSONShape checks (nested at most MaxDepth
// deep, at most MaxObjectKeys keys an object and none twice, its texts valid UTF-8).
func DecodeObject(data []byte) (map[string]any, error) {
	if err := checkJSONShape(data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	b := boundedDecoder{dec: dec, path: []any{"body"}}
	v, err := b.value()
	if err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, app.InvalidFields(app.Field("JSON decode error: extra data after the object", "json_invalid", "body", dec.InputOffset()))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, app.InvalidFields(app.Field("Input should be a valid dictionary or object to extract fields from",
			"model_attributes_type", "body"))
	}
	return obj, nil
}

// UnmarshalObject is DecodeObject, then json.Unmarshal of the body into dst, without
// DecodeObject's generic decode of a body it passes: a body DecodeObject refuses is refused
// with its answer (an *app.Error: the checks of checkJSONShape as the bytes go by, the others
// only once a cheaper sign says the body may fail them); any other error is Unmarshal's, as
// it is.
func UnmarshalObject(data []byte, dst any) error {
	var s jsonShape
	if _, err := s.feed(data); err != nil {
		return err
	}
	// A list of MaxListItems items or more, or a text that is no object (null included),
	// may be refused: DecodeObject answers.
	if first := bytes.TrimLeft(data, " \t\r\n"); s.long || len(first) == 0 || first[0] != '{' {
		if _, err := DecodeObject(data); err != nil {
			return err
		}
	}
	err := json.Unmarshal(data, dst)
	if _, ok := errors.AsType[*json.SyntaxError](err); ok {
		// Not JSON (Unmarshal checks the whole text before it decodes any of it): refused as
		// DecodeObject refuses it.
		if _, derr := DecodeObject(data); derr != nil {
			return derr
		}
	}
	return err
}

// boundedDecoder decodes a JSON value token by token (as Decode would, numbers as
// json.Number), refusing a list longer than MaxListItems at its place (path). It recurses once
// a level: it reads only texts checkJSONShape has passed (at most MaxDepth levels).
type boundedDecoder struct {
	dec  *json.Decoder
	path []any
}

func (b *boundedDecoder) value() (any, error) {
	tok, err := b.dec.Token()
	if err != nil {
		return nil, app.InvalidFields(app.Field("JSON decode error", "json_invalid", "body", jsonErrorOffset(err)))
	}
	switch tok {
	case json.Delim('{'):
		obj := map[string]any{}
		for b.dec.More() {
			key, err := b.dec.Token()
			if err != nil {
				return nil, app.InvalidFields(app.Field("JSON decode error", "json_invalid", "body", jsonErrorOffset(err)))
			}
			k, _ := key.(string)
			b.path = append(b.path, k)
			v, err := b.value()
			b.path = b.path[:len(b.path)-1]
			if err != nil {
				return nil, err
			}
			obj[k] = v
		}
		return obj, b.closing()
	case json.Delim('['):
		list := []any{}
		for i := 0; b.dec.More(); i++ {
			if i == MaxListItems {
				return nil, app.InvalidFields(app.Field(fmt.Sprintf("List should have at most %d items", MaxListItems),
					"too_long", slices.Clone(b.path)...))
			}
			b.path = append(b.path, i)
			v, err := b.value()
			b.path = b.path[:len(b.path)-1]
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, b.closing()
	}
	return tok, nil
}

// closing reads the delimiter that closes an object or a list.
func (b *boundedDecoder) closing() error {
	if _, err := b.dec.Token(); err != nil {
		return app.InvalidFields(app.Field("JSON decode error", "json_invalid", "body", jsonErrorOffset(err)))
	}
	return nil
}

func jsonErrorOffset(err error) int64 {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return syntax.Offset
	}
	return 0
}

// Fields reads typed values out of a decoded JSON object and collects every problem as a
// validation item, so one 422 reports all of them (as pydantic does). Each reader returns the
// zero value and false when the field is absent or wrong.
//
// A refusal lists at most MaxFieldErrors problems (Limit, when set, instead) and counts the
// rest in one last item (type too_many_errors): what a request costs to answer is bounded
// however many problems it holds.
type Fields struct {
	items []app.FieldError
	// Limit is how many problems are listed (0: MaxFieldErrors).
	Limit int
	// unlisted counts the problems past the limit, or what a caller counts itself (Unlisted).
	unlisted     int
	unlistedWhat string
	unlistedLoc  []any
}

// MaxFieldErrors is how many problems one refusal lists, unless its Fields say otherwise.
const MaxFieldErrors = app.MaxListed

func (f *Fields) Add(msg, typ string, loc []any) {
	limit := f.Limit
	if limit == 0 {
		limit = MaxFieldErrors
	}
	if len(f.items) >= limit {
		f.unlisted++
		return
	}
	f.items = append(f.items, app.FieldError{Loc: slices.Clone(loc), Msg: msg, Type: typ})
}

// Unlisted says that n more things (what: "rejected readings") are wrong and not listed, at
// loc: a caller that bounds its own list (by reading rather than by problem) counts the rest
// here.
func (f *Fields) Unlisted(n int, what string, loc []any) {
	f.unlisted, f.unlistedWhat, f.unlistedLoc = n, what, loc
}

// err returns the collected 422, or nil.
func (f *Fields) Err() error {
	if len(f.items) == 0 && f.unlisted == 0 {
		return nil
	}
	items := f.items
	if f.unlisted > 0 {
		what, loc := f.unlistedWhat, f.unlistedLoc
		if what == "" {
			what, loc = "problems", []any{"body"}
		}
		items = append(slices.Clip(items), app.Unlisted(f.unlisted, what, loc...))
	}
	return app.InvalidFields(items...)
}

func At(loc []any, key any) []any { return append(slices.Clone(loc), key) }

func (f *Fields) Lookup(obj map[string]any, loc []any, key string, required bool) (any, bool) {
	v, ok := obj[key]
	if !ok || v == nil {
		if required {
			f.Add("Field required", "missing", At(loc, key))
		}
		return nil, false
	}
	return v, true
}

// storedAs names the CRD field each REST field is stored in as sent: its bound is that
// field's MaxLength marker (validation.CRDMaxLength, generated from the CRDs), written once on
// the API type, so a value the API server would refuse is a 422 here, not a 500.
var storedAs = map[string]string{
	"street_address": "Site.spec.streetAddress", "address": "Site.spec.streetAddress",
	"email": "Site.spec.email", "user_email": "Site.spec.email",
	"external_id": "Asset.spec.externalID", "external_user_id": "Site.spec.externalUserID",
	"serial_number": "Asset.spec.serialNumber", "asset_model": "Asset.spec.model",
	"username": "APIClient.spec.username", "provider": "DeviceConnection.spec.provider",
	"market": "FlexEvent.spec.market",
}

// ownMaxLengths bounds the REST fields no CRD stores as sent: read into another form first
// (an MPAN or postcode with spaces, a site id), kept elsewhere, or never stored (a password,
// a provider's tokens).
var ownMaxLengths = map[string]int{
	"mpan": 64, "postcode": 16, "allowed_origin": 2048, "password": 1024, "site_id": 64,
	"access_token": 8192, "refresh_token": 8192, "token_type": 32,
}

// maxLengths bounds the strings the API takes, by field name.
var maxLengths = func() map[string]int {
	m := make(map[string]int, len(storedAs)+len(ownMaxLengths))
	for key, n := range ownMaxLengths {
		m[key] = n
	}
	for key, field := range storedAs {
		n, ok := validation.CRDMaxLength[field]
		if !ok {
			panic("web: " + field + " has no MaxLength marker") // a renamed field: every test of this package says so
		}
		m[key] = n
	}
	return m
}()

// passwordKey is the one field left as sent: a secret the client chose, compared and never
// stored or shown.
const passwordKey = "password"

// defaultMaxLength bounds any other string field.
const defaultMaxLength = 1024

func (f *Fields) Str(obj map[string]any, loc []any, key string, required bool) (string, bool) {
	v, ok := f.Lookup(obj, loc, key, required)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		f.Add("Input should be a valid string", "string_type", At(loc, key))
		return "", false
	}
	if required && strings.TrimSpace(s) == "" {
		f.Add("String should have at least 1 character", "string_too_short", At(loc, key))
		return "", false
	}
	limit, ok := maxLengths[key]
	if !ok {
		limit = defaultMaxLength
	}
	if utf8.RuneCountInString(s) > limit {
		f.Add(fmt.Sprintf("String should have at most %d characters", limit), "string_too_long", At(loc, key))
		return "", false
	}
	// No control characters in any text a request stores or names (a password is a secret
	// the client chose, compared and never stored or shown: it is left as sent).
	if key != passwordKey {
		if err := validation.SingleLineText(s); err != nil {
			f.AddValidation(err, At(loc, key))
			return "", false
		}
	}
	return s, true
}

// ValidText reports whether s is what Str takes for a required field named key (not blank,
// within the key's length, one line of text), for a door that reads a well-formed body
// without Fields and leaves the reporting of a bad one to them.
func ValidText(key, s string) bool {
	if strings.TrimSpace(s) == "" {
		return false
	}
	limit, ok := maxLengths[key]
	if !ok {
		limit = defaultMaxLength
	}
	if len(s) > limit && utf8.RuneCountInString(s) > limit {
		return false
	}
	return key == passwordKey || validation.SingleLineText(s) == nil
}

// boolean reads an optional boolean (false when absent).
func (f *Fields) Boolean(obj map[string]any, loc []any, key string) bool {
	v, ok := f.Lookup(obj, loc, key, false)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		f.Add("Input should be a valid boolean", "bool_type", At(loc, key))
	}
	return b
}

// nonNegative reads an optional number >= 0 (nil when absent or wrong). Such numbers are
// kW or kWh, stored as whole W or Wh, so they are also bounded by what an int64 holds.
func (f *Fields) NonNegative(obj map[string]any, loc []any, key string) *float64 {
	v, ok := f.Lookup(obj, loc, key, false)
	if !ok {
		return nil
	}
	n, ok := v.(json.Number)
	if !ok {
		f.Add("Input should be a valid number", "float_type", At(loc, key))
		return nil
	}
	x, err := n.Float64()
	if err == nil {
		err = validation.FiniteNumber(x)
	}
	if err != nil {
		f.Add("Input should be a finite number", "finite_number", At(loc, key))
		return nil
	}
	if x < 0 {
		f.Add("Input should be greater than or equal to 0", "greater_than_equal", At(loc, key))
		return nil
	}
	if x > units.MaxKilo {
		f.Add(fmt.Sprintf("Input should be less than or equal to %.0f", units.MaxKilo), "less_than_equal", At(loc, key))
		return nil
	}
	return &x
}

func (f *Fields) Object(obj map[string]any, loc []any, key string, required bool) (map[string]any, bool) {
	v, ok := f.Lookup(obj, loc, key, required)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		f.Add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", At(loc, key))
		return nil, false
	}
	return m, true
}

// array reads a list. Every list the API takes so far is required; required stays, as on
// the other readers.
//
//nolint:unparam // the readers share one shape (obj, loc, key, required)
func (f *Fields) Array(obj map[string]any, loc []any, key string, required bool) ([]any, bool) {
	v, ok := f.Lookup(obj, loc, key, required)
	if !ok {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		f.Add("Input should be a valid list", "list_type", At(loc, key))
		return nil, false
	}
	return a, true
}

// enum reads a string that must be one of allowed.
func Enum[T ~string](f *Fields, obj map[string]any, loc []any, key string, required bool, allowed []T) (T, bool) {
	v, ok := f.Lookup(obj, loc, key, required)
	if !ok {
		return "", false
	}
	return EnumValue(f, v, At(loc, key), allowed)
}

// enumValue checks a value (a list item, say) that must be one of allowed, reporting at loc.
func EnumValue[T ~string](f *Fields, v any, loc []any, allowed []T) (T, bool) {
	s, ok := v.(string)
	if !ok {
		f.Add("Input should be a valid string", "string_type", loc)
		return "", false
	}
	if !slices.Contains(allowed, T(s)) {
		f.Add("Input should be "+quoteOr(allowed), "enum", loc)
		return "", false
	}
	return T(s), true
}

// quoteOr renders allowed values as pydantic does: 'a', 'b' or 'c'.
func quoteOr[T ~string](allowed []T) string {
	q := make([]string, len(allowed))
	for i, a := range allowed {
		q[i] = fmt.Sprintf("'%s'", a)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// queryInt reads an integer query parameter within [lo, hi] (hi < 0: no upper bound).
func (f *Fields) QueryInt(q map[string][]string, key string, def, lo, hi int) int {
	raw, ok := q[key]
	if !ok || len(raw) == 0 || raw[0] == "" {
		return def
	}
	n, err := strconv.Atoi(raw[0])
	switch { // the location made only for a refusal: a read that pages allocates nothing here
	case err != nil:
		f.Add("Input should be a valid integer, unable to parse string as an integer", "int_parsing", []any{"query", key})
	case n < lo:
		f.Add(fmt.Sprintf("Input should be greater than or equal to %d", lo), "greater_than_equal", []any{"query", key})
	case hi >= 0 && n > hi:
		f.Add(fmt.Sprintf("Input should be less than or equal to %d", hi), "less_than_equal", []any{"query", key})
	default:
		return n
	}
	return def
}

// UUIDParam reads a path parameter that must be a UUID, in its canonical lower-case form.
func (f *Fields) UUIDParam(r *http.Request, name string) string {
	id, err := validation.ParseUUID(r.PathValue(name))
	if err != nil {
		f.AddValidation(err, []any{"path", name})
	}
	return id
}

// AddValidation records an internal/validation error at loc.
func (f *Fields) AddValidation(err error, loc []any) {
	var ve *validation.Error
	if errors.As(err, &ve) {
		f.Add(ve.Msg, ve.Type, loc)
		return
	}
	f.Add(err.Error(), "value_error", loc)
}

// Join adds a body's decoding error to the problems collected so far (the path's), so that
// one refusal names every problem; any other error (too large, unreadable) stands alone.
func (f *Fields) Join(err error) error {
	if e := app.As(err); e != nil && e.Kind == app.Invalid {
		if items, ok := e.Detail.([]app.FieldError); ok {
			f.items = append(f.items, items...)
			return f.Err()
		}
	}
	return err
}

// Items are the problems collected so far.
func (f *Fields) Items() []app.FieldError { return f.items }

// DecodeForm reads an application/x-www-form-urlencoded body as a flat object of strings,
// so the form endpoints validate with the same field readers (and refusal form) as JSON ones.
func DecodeForm(r *http.Request) (map[string]any, error) {
	if ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); ct != "application/x-www-form-urlencoded" {
		return nil, app.InvalidFields(app.Field("Input should be form data (application/x-www-form-urlencoded)", "model_attributes_type", "body"))
	}
	r.Body = http.MaxBytesReader(nil, r.Body, MaxBodyBytes)
	if err := r.ParseForm(); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, app.Fail(app.TooLarge, "Request body larger than %d bytes", MaxBodyBytes)
		}
		return nil, app.InvalidFields(app.Field("Form data could not be parsed", "value_error", "body"))
	}
	obj := make(map[string]any, len(r.PostForm))
	for k, v := range r.PostForm {
		if len(v) > 0 {
			obj[k] = v[0]
		}
	}
	return obj, nil
}

// ReadBody reads a JSON object body: parse reads its fields into the caller's input, and every
// problem comes back as one refusal (Invalid, the 422 form).
func ReadBody(r *http.Request, parse func(f *Fields, body map[string]any)) error {
	body, err := DecodeJSON(r)
	if err != nil {
		return err
	}
	f := &Fields{}
	parse(f, body)
	return f.Err()
}

// Timestamp reads an instant: RFC 3339 / ISO 8601 text with its zone, within the supported
// range (validation.ParseAwareTimestamp: 422 at the field otherwise); ok is false when it is
// absent or refused. Every date-time a door reads goes through it, or through QueryTimestamp,
// Date, QueryDate or PathDate, so that no time out of the range reaches a store.
func (f *Fields) Timestamp(obj map[string]any, loc []any, key string, required bool) (time.Time, bool) {
	s, ok := f.Str(obj, loc, key, required)
	if !ok {
		return time.Time{}, false
	}
	return f.parseTimestamp(s, At(loc, key))
}

// QueryTimestamp reads an optional instant from a query parameter, as Timestamp (ok is false
// when it is absent or refused).
func (f *Fields) QueryTimestamp(q map[string][]string, key string) (time.Time, bool) {
	raw := q[key]
	if len(raw) == 0 || raw[0] == "" {
		return time.Time{}, false
	}
	return f.parseTimestamp(raw[0], []any{"query", key})
}

func (f *Fields) parseTimestamp(s string, loc []any) (time.Time, bool) {
	t, err := validation.ParseAwareTimestamp(s)
	if err != nil {
		f.AddValidation(err, loc)
		return time.Time{}, false
	}
	return t, true
}

// Date reads a calendar date, YYYY-MM-DD within the supported range (validation.ParseDate: 422
// at the field otherwise), at midnight UTC; ok is false when it is absent or refused.
func (f *Fields) Date(obj map[string]any, loc []any, key string, required bool) (time.Time, bool) {
	s, ok := f.Str(obj, loc, key, required)
	if !ok {
		return time.Time{}, false
	}
	return f.parseDate(s, At(loc, key))
}

// PathDate reads a path parameter that must be a date, as Date.
func (f *Fields) PathDate(r *http.Request, name string) (time.Time, bool) {
	return f.parseDate(r.PathValue(name), []any{"path", name})
}

func (f *Fields) parseDate(s string, loc []any) (time.Time, bool) {
	d, err := validation.ParseDate(s)
	if err != nil {
		f.AddValidation(err, loc)
		return time.Time{}, false
	}
	return d, true
}
