package web

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/flexsite/flexsite/internal/app"
)

// TestDecodeObjectBoundsLists: a list longer than MaxListItems, anywhere in a body, is a 422
// at its place, found while decoding; one of MaxListItems is decoded as before.
func TestDecodeObjectBoundsLists(t *testing.T) {
	list := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("{},", n), ",") + "]" }
	obj, err := DecodeObject([]byte(`{"a": {"b": ` + list(MaxListItems) + `}, "n": 1.50, "s": "x", "t": true, "z": null}`))
	if err != nil {
		t.Fatal(err)
	}
	if b := obj["a"].(map[string]any)["b"].([]any); len(b) != MaxListItems || fmt.Sprint(b[0]) != "map[]" ||
		obj["n"] != json.Number("1.50") || obj["s"] != "x" || obj["t"] != true || obj["z"] != nil {
		t.Fatalf("decoded %v", obj)
	}
	for _, body := range []string{
		`{"assets": ` + list(350_000) + `}`,
		`{"site": {"ids": ` + list(MaxListItems+1) + `}}`,
	} {
		_, err := DecodeObject([]byte(body))
		e := app.As(err)
		if e == nil || e.Kind != app.Invalid {
			t.Fatalf("%.40s: %v, want 422", body, err)
		}
		items := e.Detail.([]app.FieldError)
		if len(items) != 1 || items[0].Type != "too_long" || !strings.Contains(items[0].Msg, "at most 1000 items") {
			t.Fatalf("%.40s: %+v", body, items)
		}
	}
	for body, want := range map[string]string{`[1]`: "model_attributes_type", `{"a": [1,}`: "json_invalid",
		`{} x`: "json_invalid", ``: "json_invalid"} {
		_, err := DecodeObject([]byte(body))
		if e := app.As(err); e == nil || e.Detail.([]app.FieldError)[0].Type != want {
			t.Fatalf("%q: %v, want %s", body, err, want)
		}
	}
}

// TestFieldsListAtMost: a refusal lists MaxFieldErrors problems and counts the rest.
func TestFieldsListAtMost(t *testing.T) {
	f := &Fields{}
	for i := range 250 {
		f.Add("Field required", "missing", []any{"body", "assets", i, "type"})
	}
	items := app.As(f.Err()).Detail.([]app.FieldError)
	if len(items) != MaxFieldErrors+1 || items[MaxFieldErrors].Msg != "150 more problems, not listed" ||
		items[MaxFieldErrors].Type != "too_many_errors" {
		t.Fatalf("%d items, last %+v", len(items), items[len(items)-1])
	}
}

// TestUnmarshalObjectAnswersAsDecodeObject: UnmarshalObject refuses what DecodeObject refuses,
// with the same answer, and decodes what it passes as json.Unmarshal does.
func TestUnmarshalObjectAnswersAsDecodeObject(t *testing.T) {
	list := func(n int) string { return "[" + strings.TrimSuffix(strings.Repeat("1,", n), ",") + "]" }
	type shape struct {
		A []int          `json:"a"`
		S string         `json:"s"`
		N json.Number    `json:"n"`
		M map[string]any `json:"m"`
	}
	for _, body := range []string{
		`{"a": [1, 2], "s": "x", "n": 1.50, "m": {"k": [true, null]}}`,
		` {"a": ` + list(MaxListItems) + `, "other": ` + list(MaxListItems) + "}\n",
		`{"a": ` + list(MaxListItems+1) + `}`,
		`{"other": {"deep": ` + list(MaxListItems+1) + `}}`,
		`{"a": [1,}`, `{} x`, `{}{}`, ``, `   `, `null`, `[1]`, `"a report"`, `1`, `{"a": 1, "a": 2}`,
		nested(MaxDepth), nested(MaxDepth + 1), "{\"s\": \"x\xff\"}", `{"s": "\ud800"}`,
		`{"o": ` + keys(MaxObjectKeys+1) + `}`, `{"s": 5}`, `{"a": "many"}`, `{"n": "1"}`,
	} {
		var want, got shape
		_, derr := DecodeObject([]byte(body))
		var uerr error
		if derr == nil {
			uerr = json.Unmarshal([]byte(body), &want)
		}
		err := UnmarshalObject([]byte(body), &got)
		switch {
		case derr != nil:
			if fmt.Sprint(err) != fmt.Sprint(derr) || verdict(err) != verdict(derr) {
				t.Errorf("%.60q: %v, want DecodeObject's %v", body, err, derr)
			}
		case fmt.Sprint(err) != fmt.Sprint(uerr):
			t.Errorf("%.60q: %v, want Unmarshal's %v", body, err, uerr)
		case fmt.Sprintf("%+v", got) != fmt.Sprintf("%+v", want):
			t.Errorf("%.60q: decoded %+v, want %+v", body, got, want)
		}
	}
}
