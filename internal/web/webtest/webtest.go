// Package webtest holds what the doors' white-box fuzz tests share: a store that every read
// fails (so a request that reaches it proves it passed every check its door makes first), and
// the check that an answer is a well-formed 4xx in the documented JSON form, never a 500.
// Only tests import it.
package webtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/flexsite/flexsite/internal/app"
	"github.com/flexsite/flexsite/internal/web"
)

// ErrStoreReached is what every read of UnreachableStore fails with.
var ErrStoreReached = errors.New("fuzz: the request reached the store")

// UnreachableStore is a reader that holds nothing and fails every read with ErrStoreReached:
// reaching it means a request passed every check the handler makes before its first read.
type UnreachableStore struct{}

// Get fails with ErrStoreReached.
func (UnreachableStore) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return ErrStoreReached
}

// List fails with ErrStoreReached.
func (UnreachableStore) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return ErrStoreReached
}

// Outcome is how a handler ended: it reached the store, or answered Err.
type Outcome struct {
	Reached bool
	Err     *web.Error
}

// CheckAnswer fails unless err is ErrStoreReached or an answer the client gets as a
// well-formed 4xx: a 422's validation record names at least one item, each with a msg, a type
// and a loc that starts with one of roots and holds only strings and integers; rendered by
// web.WriteError, it is {"detail": ...} with the same status.
func CheckAnswer(t testing.TB, err error, roots ...string) Outcome {
	t.Helper()
	if err == nil {
		t.Fatal("the handler answered 200 without reading anything")
	}
	if errors.Is(err, ErrStoreReached) {
		return Outcome{Reached: true}
	}
	e := web.HTTPError(err)
	if e == nil {
		t.Fatalf("error %v (%T) is neither an answer nor a refusal: the client would get a 500", err, err)
	}
	if e.Status < 400 || e.Status > 499 {
		t.Fatalf("status %d is not a 4xx: %v", e.Status, e)
	}
	if items, ok := e.Detail.([]app.FieldError); ok {
		checkItems(t, e.Status, items, roots)
	}
	// Rendered as the client sees it.
	rec := httptest.NewRecorder()
	web.WriteError(logr.Discard(), rec, httptest.NewRequest(http.MethodGet, "/", nil), err)
	if rec.Code != e.Status {
		t.Fatalf("rendered with status %d, want %d", rec.Code, e.Status)
	}
	var body map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body["detail"] == nil ||
		(e.OAuth == "" && len(body) != 1) {
		t.Fatalf("rendered body %q is not {\"detail\": ...} (%v)", rec.Body.Bytes(), err)
	}
	return Outcome{Err: e}
}

func checkItems(t testing.TB, status int, items []app.FieldError, roots []string) {
	t.Helper()
	if status != http.StatusUnprocessableEntity {
		t.Fatalf("a validation record with status %d", status)
	}
	if len(items) == 0 {
		t.Fatal("a 422 validation record without items")
	}
	for _, it := range items {
		if len(it.Loc) == 0 || !slices.Contains(roots, fmt.Sprint(it.Loc[0])) {
			t.Fatalf("item %+v: loc does not start with one of %v", it, roots)
		}
		for _, part := range it.Loc {
			switch part.(type) {
			case string, int, int64:
			default:
				t.Fatalf("item %+v: loc part %v is a %T", it, part, part)
			}
		}
		if it.Msg == "" || it.Type == "" {
			t.Fatalf("item %+v: no msg or type", it)
		}
	}
}

// Items is the validation record of an outcome (nil when it has none).
func (o Outcome) Items() []app.FieldError {
	if o.Err == nil {
		return nil
	}
	items, _ := o.Err.Detail.([]app.FieldError)
	return items
}

// SameAnswer fails unless the handler's answer is the one the field readers predict: want nil
// means the handler must reach the store, else it must answer want's status and detail (a
// validation record's items in any order).
func SameAnswer(t testing.TB, got Outcome, want error) {
	t.Helper()
	if want == nil {
		if !got.Reached {
			t.Fatalf("the decoder accepts the input, but the handler answers %v", got.Err)
		}
		return
	}
	wantErr := web.HTTPError(want)
	if wantErr == nil {
		t.Fatalf("predicted error %v is neither an answer nor a refusal", want)
	}
	if got.Reached {
		t.Fatalf("the decoder refuses the input (%v), but the handler reached the store", want)
	}
	if got.Err.Status != wantErr.Status || !reflect.DeepEqual(sortedDetail(got.Err.Detail), sortedDetail(wantErr.Detail)) {
		t.Fatalf("the handler answers %v, the decoder %v", got.Err, wantErr)
	}
}

// sortedDetail orders a validation record's items: their order is not part of the contract.
func sortedDetail(detail any) any {
	items, ok := detail.([]app.FieldError)
	if !ok {
		return detail
	}
	items = slices.Clone(items)
	slices.SortFunc(items, func(a, b app.FieldError) int {
		return strings.Compare(fmt.Sprint(a.Loc, a.Type, a.Msg), fmt.Sprint(b.Loc, b.Type, b.Msg))
	})
	return items
}

// JSONRequest is a POST of data as application/json.
func JSONRequest(data []byte) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", bytes.NewReader(data))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// SecurityHeaders are the security headers of an answer (web.PageHeaders's), by name, with
// the ones it lacks absent: a test compares them whole, so a header added or dropped shows.
func SecurityHeaders(h http.Header) map[string]string {
	out := map[string]string{}
	for _, name := range []string{"Content-Security-Policy", "X-Frame-Options", "Cross-Origin-Opener-Policy",
		"Referrer-Policy", "X-Content-Type-Options", "Cache-Control"} {
		if v := h.Get(name); v != "" {
			out[name] = v
		}
	}
	return out
}
