package facade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/flexsite/flexsite/internal/units"
	"github.com/flexsite/flexsite/internal/validation"
)

// maxBodyBytes bounds a request body; larger bodies are refused with 413.
const maxBodyBytes = 1 << 20

// decodeJSON reads a JSON object body. Malformed JSON or a body that is not an object is a 422
// (json_invalid / model_attributes_type), never a 500.
func decodeJSON(r *http.Request) (map[string]any, error) {
	data, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fail(http.StatusRequestEntityTooLarge, "Request body larger than %d bytes", maxBodyBytes)
		}
		return nil, fail(http.StatusBadRequest, "Could not read the request body")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, invalid(field("JSON decode error", "json_invalid", "body", jsonErrorOffset(err)))
	}
	if dec.More() {
		return nil, invalid(field("JSON decode error: extra data after the object", "json_invalid", "body", dec.InputOffset()))
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, invalid(field("Input should be a valid dictionary or object to extract fields from",
			"model_attributes_type", "body"))
	}
	return obj, nil
}

func jsonErrorOffset(err error) int64 {
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		return syntax.Offset
	}
	return 0
}

// fields reads typed values out of a decoded JSON object and collects every problem as a
// validation item, so one 422 reports all of them (as pydantic does). Each reader returns the
// zero value and false when the field is absent or wrong.
type fields struct {
	items []ValidationItem
}

func (f *fields) add(msg, typ string, loc []any) {
	f.items = append(f.items, ValidationItem{Loc: slices.Clone(loc), Msg: msg, Type: typ})
}

// err returns the collected 422, or nil.
func (f *fields) err() error {
	if len(f.items) == 0 {
		return nil
	}
	return invalid(f.items...)
}

func at(loc []any, key any) []any { return append(slices.Clone(loc), key) }

func (f *fields) lookup(obj map[string]any, loc []any, key string, required bool) (any, bool) {
	v, ok := obj[key]
	if !ok || v == nil {
		if required {
			f.add("Field required", "missing", at(loc, key))
		}
		return nil, false
	}
	return v, true
}

// maxLengths bounds the strings the API takes, by field name, to what the CRD schema stores
// (a longer value would be refused by the API server: it must be a 422 here, not a 500).
var maxLengths = map[string]int{
	"mpan": 64, "postcode": 16, "street_address": 512, "address": 512, "email": 254, "user_email": 254,
	"external_id": 256, "external_user_id": 256, "serial_number": 256, "asset_model": 256,
	"allowed_origin": 2048, "username": 128, "password": 1024, "site_id": 64,
}

// defaultMaxLength bounds any other string field.
const defaultMaxLength = 1024

func (f *fields) str(obj map[string]any, loc []any, key string, required bool) (string, bool) {
	v, ok := f.lookup(obj, loc, key, required)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		f.add("Input should be a valid string", "string_type", at(loc, key))
		return "", false
	}
	if required && strings.TrimSpace(s) == "" {
		f.add("String should have at least 1 character", "string_too_short", at(loc, key))
		return "", false
	}
	limit, ok := maxLengths[key]
	if !ok {
		limit = defaultMaxLength
	}
	if utf8.RuneCountInString(s) > limit {
		f.add(fmt.Sprintf("String should have at most %d characters", limit), "string_too_long", at(loc, key))
		return "", false
	}
	return s, true
}

// boolean reads an optional boolean (false when absent).
func (f *fields) boolean(obj map[string]any, loc []any, key string) bool {
	v, ok := f.lookup(obj, loc, key, false)
	if !ok {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		f.add("Input should be a valid boolean", "bool_type", at(loc, key))
	}
	return b
}

// nonNegative reads an optional number >= 0 (nil when absent or wrong). Such numbers are
// kW or kWh, stored as whole W or Wh, so they are also bounded by what an int64 holds.
func (f *fields) nonNegative(obj map[string]any, loc []any, key string) *float64 {
	v, ok := f.lookup(obj, loc, key, false)
	if !ok {
		return nil
	}
	n, ok := v.(json.Number)
	if !ok {
		f.add("Input should be a valid number", "float_type", at(loc, key))
		return nil
	}
	x, err := n.Float64()
	if err != nil || math.IsInf(x, 0) || math.IsNaN(x) {
		f.add("Input should be a finite number", "finite_number", at(loc, key))
		return nil
	}
	if x < 0 {
		f.add("Input should be greater than or equal to 0", "greater_than_equal", at(loc, key))
		return nil
	}
	if x > units.MaxKilo {
		f.add(fmt.Sprintf("Input should be less than or equal to %.0f", units.MaxKilo), "less_than_equal", at(loc, key))
		return nil
	}
	return &x
}

func (f *fields) object(obj map[string]any, loc []any, key string, required bool) (map[string]any, bool) {
	v, ok := f.lookup(obj, loc, key, required)
	if !ok {
		return nil, false
	}
	m, ok := v.(map[string]any)
	if !ok {
		f.add("Input should be a valid dictionary or object to extract fields from", "model_attributes_type", at(loc, key))
		return nil, false
	}
	return m, true
}

// array reads a list. Every list the API takes so far is required; required stays, as on
// the other readers.
//
//nolint:unparam // the readers share one shape (obj, loc, key, required)
func (f *fields) array(obj map[string]any, loc []any, key string, required bool) ([]any, bool) {
	v, ok := f.lookup(obj, loc, key, required)
	if !ok {
		return nil, false
	}
	a, ok := v.([]any)
	if !ok {
		f.add("Input should be a valid list", "list_type", at(loc, key))
		return nil, false
	}
	return a, true
}

// enum reads a string that must be one of allowed.
func enum[T ~string](f *fields, obj map[string]any, loc []any, key string, required bool, allowed []T) (T, bool) {
	v, ok := f.lookup(obj, loc, key, required)
	if !ok {
		return "", false
	}
	return enumValue(f, v, at(loc, key), allowed)
}

// enumValue checks a value (a list item, say) that must be one of allowed, reporting at loc.
func enumValue[T ~string](f *fields, v any, loc []any, allowed []T) (T, bool) {
	s, ok := v.(string)
	if !ok {
		f.add("Input should be a valid string", "string_type", loc)
		return "", false
	}
	if !slices.Contains(allowed, T(s)) {
		f.add("Input should be "+quoteOr(allowed), "enum", loc)
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
func (f *fields) queryInt(q map[string][]string, key string, def, lo, hi int) int {
	raw, ok := q[key]
	if !ok || len(raw) == 0 || raw[0] == "" {
		return def
	}
	n, err := strconv.Atoi(raw[0])
	loc := []any{"query", key}
	switch {
	case err != nil:
		f.add("Input should be a valid integer, unable to parse string as an integer", "int_parsing", loc)
	case n < lo:
		f.add(fmt.Sprintf("Input should be greater than or equal to %d", lo), "greater_than_equal", loc)
	case hi >= 0 && n > hi:
		f.add(fmt.Sprintf("Input should be less than or equal to %d", hi), "less_than_equal", loc)
	default:
		return n
	}
	return def
}

// The paged entity lists (GET /entities/site, GET /entities/asset) take the same limit and
// offset, with the same bounds, and answer the same page numbers.
const (
	defaultPageLimit = 10
	maxPageLimit     = 5000
)

// paging reads a paged list's limit (1..5000, default 10) and offset (>= 0, default 0).
func (f *fields) paging(q map[string][]string) (limit, offset int) {
	limit = f.queryInt(q, "limit", defaultPageLimit, 1, maxPageLimit)
	offset = f.queryInt(q, "offset", 0, 0, -1)
	return limit, offset
}

// page is the window limit and offset select from a list of total items: items [from, to),
// the number of pages and the 1-based number of the page (an offset past the end selects
// nothing, and still has a page number).
type page struct {
	from, to           int
	totalPages, number int
}

func pageOf(total, limit, offset int) page {
	from := min(offset, total)
	p := page{from: from, to: from + min(limit, total-from), totalPages: (total + limit - 1) / limit, number: offset / limit}
	if p.number < math.MaxInt { // offset math.MaxInt with limit 1 has no next number
		p.number++
	}
	return p
}

// uuidParam reads a path parameter that must be a UUID, in its canonical lower-case form.
func (f *fields) uuidParam(r *http.Request, name string) string {
	id, err := validation.ParseUUID(r.PathValue(name))
	if err != nil {
		f.addValidation(err, []any{"path", name})
	}
	return id
}
