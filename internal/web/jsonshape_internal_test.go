package web

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/flexsite/flexsite/internal/app"
)

// nested is a body whose value "x" nests levels-1 lists: levels levels in all.
func nested(levels int) string {
	return `{"x": ` + strings.Repeat("[", levels-1) + strings.Repeat("]", levels-1) + `}`
}

// keys is an object of n keys k0, k1 ...
func keys(n int) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d": %d`, i, i)
	}
	b.WriteByte('}')
	return b.String()
}

// TestJSONShape: what DecodeObject refuses of a body's shape, and the same verdict when the body
// is read as a stream through JSONShaped, one byte a read (the readings' decoder).
func TestJSONShape(t *testing.T) {
	accepted := []string{
		nested(MaxDepth),
		`{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{"}`,
		`{"a": "\"[{\\", "b": "x\\\"[[[[", "c": "\\"}`,
		`{"a": "é€😀", "b": "\ud83d\ude00", "c": "\u00e9\n\"", "d": 1e999, "e": -0.5e-400}`,
		`{"o": ` + keys(MaxObjectKeys) + `}`,
		`{"l": [{"k": 1}, {"k": 1}], "m": {"k": {"k": 1}}, "k": 1}`,
		`{"K": 1, "k": 1, "k ": 1, "\u006b\u006B": 1, "kk2": 1}`,
	}
	for _, body := range accepted {
		if _, err := DecodeObject([]byte(body)); err != nil {
			t.Errorf("%.60s: %v", body, err)
		}
		if err := readShaped(body); err != nil {
			t.Errorf("streamed %.60s: %v", body, err)
		}
	}

	twenty := strings.TrimSuffix(strings.TrimPrefix(keys(20), "{"), "}")
	refused := []struct {
		body, typ string
		loc       []any
	}{
		// The level past MaxDepth is refused at the byte that opens it.
		{nested(MaxDepth + 1), "json_invalid", []any{"body", int64(len(`{"x": `) + MaxDepth - 1)}},
		{strings.Repeat("[", 1_000_000), "json_invalid", []any{"body", int64(MaxDepth)}},
		{strings.Repeat(`{"a":`, 100), "json_invalid", []any{"body", int64(5 * MaxDepth)}},
		{`{"a": "]]]]", "b": ` + strings.Repeat("[", MaxDepth), "json_invalid", []any{"body", int64(19 + MaxDepth - 1)}},
		{`{"o": ` + keys(MaxObjectKeys+1) + `}`, "too_long", []any{"body", "o"}},
		{`{"a": 1, "a": 2}`, "duplicate_key", []any{"body", "a"}},
		{`{"a": 1, "\u0061": 2}`, "duplicate_key", []any{"body", "a"}},
		{`{"s": {"k": {"x": [1]}, "k": 2}}`, "duplicate_key", []any{"body", "s", "k"}},
		{`{"l": [{"k": 1}, {"j": [], "k": 1, "k": 2}]}`, "duplicate_key", []any{"body", "l", 1, "k"}},
		{`{` + twenty + `, "k3": 0}`, "duplicate_key", []any{"body", "k3"}},
		{`{"é": {` + twenty + `, "k19": 0}}`, "duplicate_key", []any{"body", "é", "k19"}},
		{"{\"a\": \"x\xff\"}", "json_invalid", []any{"body", int64(8)}},
		{"{\"a\": \"\xc0\xaf\"}", "json_invalid", []any{"body", int64(7)}},
		{"{\"a\": \"\xed\xa0\x80\"}", "json_invalid", []any{"body", int64(8)}},
		{"{\"a\": \"\xe2\x82\"}", "json_invalid", []any{"body", int64(9)}},
		{"{\"a\": \"\xf4\x90\x80\x80\"}", "json_invalid", []any{"body", int64(8)}},
		{"{\"\xfe\": 1}", "json_invalid", []any{"body", int64(2)}},
		{`{"a": "\ud800"}`, "json_invalid", []any{"body", int64(13)}},
		{`{"a": "\udc00"}`, "json_invalid", []any{"body", int64(12)}},
		{`{"a": "\ud800\u0041"}`, "json_invalid", []any{"body", int64(18)}},
		{`{"a": "\ud800\n"}`, "json_invalid", []any{"body", int64(14)}},
	}
	for _, c := range refused {
		_, err := DecodeObject([]byte(c.body))
		if got := verdict(err); got != fmt.Sprint(c.loc, " ", c.typ) {
			t.Errorf("%.60q: %s, want %v %s", c.body, got, c.loc, c.typ)
		}
		if got := verdict(readShaped(c.body)); got != fmt.Sprint(c.loc, " ", c.typ) {
			t.Errorf("streamed %.60q: %s, want %v %s", c.body, got, c.loc, c.typ)
		}
	}

	// An escape cut short is the decoder's to refuse; the check reads on in step (the quote
	// after it closes the text).
	if got := verdict(checkJSONShape([]byte(`{"a": "\u12", "b": "` + "\xff" + `"}`))); got != "[body 20] json_invalid" {
		t.Errorf("after an escape cut short: %s", got)
	}

	// A number out of range is the number's reader's to refuse, in the 422 form.
	obj, err := DecodeObject([]byte(`{"power_kw": 1e999}`))
	if err != nil {
		t.Fatal(err)
	}
	f := &Fields{}
	if f.NonNegative(obj, []any{"body"}, "power_kw") != nil || verdict(f.Err()) != "[body power_kw] finite_number" {
		t.Fatalf("1e999: %v", f.Err())
	}
}

// verdict is a 422's one item as "loc type", or what else err is.
func verdict(err error) string {
	e := app.As(err)
	if e == nil || e.Kind != app.Invalid {
		return fmt.Sprintf("not a 422: %v", err)
	}
	items := e.Detail.([]app.FieldError)
	if len(items) != 1 {
		return fmt.Sprintf("%d items: %+v", len(items), items)
	}
	return fmt.Sprint(items[0].Loc, " ", items[0].Type)
}

// readShaped decodes body as a stream through JSONShaped, one byte a read: its refusal as
// BodyError tells it, or the decoder's own error.
func readShaped(body string) error {
	dec := json.NewDecoder(JSONShaped(iotest.OneByteReader(strings.NewReader(body))))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil {
		return nil
	}
	if told := BodyError(err, MaxBodyBytes); told != nil {
		return told
	}
	return err
}

// TestJSONShapeMemory: a body of a million open lists (1 MiB) is refused holding nothing per
// level: DecodeObject allocates a few KiB beyond the body, as JSONShaped's decoder does.
func TestJSONShapeMemory(t *testing.T) {
	body := []byte(strings.Repeat("[", 1_000_000))
	allocated := func(f func()) uint64 {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		return after.TotalAlloc - before.TotalAlloc
	}
	if n := allocated(func() {
		if _, err := DecodeObject(body); verdict(err) != fmt.Sprint([]any{"body", int64(MaxDepth)}, " json_invalid") {
			t.Errorf("DecodeObject: %v", err)
		}
	}); n > 64<<10 {
		t.Errorf("DecodeObject allocated %d bytes", n)
	}
	if n := allocated(func() {
		dec := json.NewDecoder(JSONShaped(strings.NewReader(string(body))))
		for {
			if _, err := dec.Token(); err != nil {
				if err == io.EOF || BodyError(err, MaxBodyBytes) == nil {
					t.Errorf("streamed: %v", err)
				}
				break
			}
		}
	}); n > 64<<10+1<<20 { // the body's copy (strings.NewReader(string(body)))
		t.Errorf("the streamed decoder allocated %d bytes", n)
	}
}
