package openadr

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/flexsite/flexsite/internal/app/vtn"
	"github.com/flexsite/flexsite/internal/openadr/oadr"
	"github.com/flexsite/flexsite/internal/web"
)

// The bounds on a body (docs/openadr.md, "Limits"): a VEN or a resource is small; a report
// carries intervals (a day's half-hours of a few payloads is a few kilobytes).
const (
	maxObjectBody = 64 << 10
	maxReportBody = web.MaxBodyBytes
	// maxValuesMaps bounds a VEN's or resource's attributes and targets, each; maxValues the
	// values of one of them.
	maxValuesMaps = 50
	maxValues     = 50
)

// decodeBody reads a JSON body of up to limit bytes into dst, one of the document's shapes:
// too large, malformed, of the wrong shape or the wrong types, it is a 400 (the document's
// answer to input it cannot take) naming what is wrong.
func decodeBody(r *http.Request, limit int64, dst any) error {
	data, err := web.ReadBodyUpTo(r, limit)
	if err == nil {
		err = web.UnmarshalObject(data, dst)
	}
	if err != nil {
		if p := asProblem(err); p != nil {
			return badRequest("%s", *p.Detail)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return badRequest("%s: must be a JSON %s, not %s", te.Field, jsonKind(te.Type.Kind().String()), te.Value)
		}
		var pe *time.ParseError
		if errors.As(err, &pe) {
			return badRequest("a date-time must be RFC 3339 (got %q)", pe.Value)
		}
		return badRequest("The body is not the document's shape: %v", err)
	}
	return nil
}

func jsonKind(goKind string) string {
	switch goKind {
	case "string":
		return "string"
	case "int", "int32", "int64", "float32", "float64":
		return "number"
	case "slice":
		return "array"
	case "bool":
		return "boolean"
	}
	return "object"
}

// maxText is the document's bound on its names and ids, in characters.
const maxText = 128

// checkText refuses a text outside the document's length bounds: 1 to maxText characters.
func checkText(field, v string) error {
	if n := utf8.RuneCountInString(v); n < 1 || n > maxText {
		return badRequest("%s must be 1 to %d characters long", field, maxText)
	}
	return nil
}

var objectIDPattern = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// checkObjectID refuses what the document's objectID is not.
func checkObjectID(field, v string) error {
	if err := checkText(field, v); err != nil {
		return err
	}
	if !objectIDPattern.MatchString(v) {
		return badRequest("%s must be letters, digits, '_' and '-' only", field)
	}
	return nil
}

// checkObjectType refuses an objectType other than the document's for the object.
func checkObjectType[T ~string](field string, got *T, want T) error {
	if got != nil && *got != want {
		return badRequest("%s must be %s", field, want)
	}
	return nil
}

// valuesIn reads the document's valuesMap objects at field (at most maxValuesMaps, each of at
// most maxValues values, each a number, a string, a boolean or a point).
func valuesIn(field string, in *[]oadr.ValuesMap) ([]vtn.Values, error) {
	if in == nil {
		return nil, nil
	}
	if len(*in) > maxValuesMaps {
		return nil, badRequest("%s holds at most %d items", field, maxValuesMaps)
	}
	out := make([]vtn.Values, len(*in))
	for i, m := range *in {
		at := fmt.Sprintf("%s[%d]", field, i)
		if err := checkText(at+".type", m.Type); err != nil {
			return nil, err
		}
		if m.Values == nil {
			return nil, badRequest("%s.values is required", at)
		}
		if len(m.Values) > maxValues {
			return nil, badRequest("%s.values holds at most %d values", at, maxValues)
		}
		vals := make([]any, len(m.Values))
		for j, item := range m.Values {
			v, err := valueOf(item)
			if err != nil {
				return nil, badRequest("%s.values[%d] must be a number, a string, a boolean or a point {x, y}", at, j)
			}
			vals[j] = v
		}
		out[i] = vtn.Values{Type: m.Type, Values: vals}
	}
	return out, nil
}

// valueOf is one value of a valuesMap, as JSON reads it: a number, a string, a boolean, or a
// point (an object of two numbers, x and y).
func valueOf(item oadr.ValuesMap_Values_Item) (any, error) {
	raw, err := item.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, err
	}
	switch t := v.(type) {
	case float64, string, bool:
		return t, nil
	case map[string]any:
		x, xok := t["x"].(float64)
		y, yok := t["y"].(float64)
		if len(t) == 2 && xok && yok {
			return map[string]any{"x": x, "y": y}, nil
		}
	}
	return nil, errors.New("not a value")
}

// valuesOut is stored valuesMap objects in the document's shape (nil: none).
func valuesOut(in []vtn.Values) *[]oadr.ValuesMap {
	if in == nil {
		return nil
	}
	raw, err := json.Marshal(in)
	if err != nil {
		return nil
	}
	var out []oadr.ValuesMap
	if json.Unmarshal(raw, &out) != nil {
		return nil
	}
	return &out
}

// durationPattern is the document's duration without its look-ahead (checked on its own).
var durationPattern = regexp.MustCompile(`^(-?)P(?:(\d+)Y)?(?:(\d+)M)?(?:(\d+)([DW]))?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?)?$`)

// parseDuration reads the document's ISO 8601 duration. exact is false when it counts years
// or months, which are no fixed length of time.
func parseDuration(s string) (d time.Duration, exact bool, err error) {
	m := durationPattern.FindStringSubmatch(s)
	rest := s
	if len(rest) > 0 && rest[0] == '-' {
		rest = rest[1:]
	}
	if m == nil || len(rest) < 2 || (!isDigit(rest[1]) && (rest[1] != 'T' || len(rest) < 3 || !isDigit(rest[2]))) {
		return 0, false, fmt.Errorf("%q is not an ISO 8601 duration", s)
	}
	exact = m[2] == "" && m[3] == ""
	num := func(v string) float64 {
		f, _ := strconv.ParseFloat(v, 64)
		return f
	}
	secs := num(m[6])*3600 + num(m[7])*60 + num(m[8])
	if m[4] != "" {
		days := num(m[4])
		if m[5] == "W" {
			days *= 7
		}
		secs += days * 86400
	}
	if secs > float64(100*365*24*3600) {
		return 0, false, fmt.Errorf("%q is longer than any period Flexsite reads", s)
	}
	d = time.Duration(secs * float64(time.Second))
	if m[1] == "-" {
		d = -d
	}
	return d, exact, nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

// checkPeriod refuses an intervalPeriod whose durations are not the document's.
func checkPeriod(field string, p *oadr.IntervalPeriod) error {
	if p == nil {
		return nil
	}
	for name, d := range map[string]*string{"duration": p.Duration, "randomizeStart": p.RandomizeStart} {
		if d == nil {
			continue
		}
		if _, _, err := parseDuration(*d); err != nil {
			return badRequest("%s.%s: %v", field, name, err)
		}
	}
	return nil
}
