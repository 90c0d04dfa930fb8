package web

import (
	"net/url"
	"reflect"
	"testing"
)

// QueryInto reads every query as r.URL.Query() does: plain ones split here, the others
// (escapes, semicolons, bad escapes, many parameters) through net/url.
func TestQueryIntoReadsAsURLQuery(t *testing.T) {
	many := "a=1"
	for range maxPlainQueryParams + 3 {
		many += "&a=2&b"
	}
	for _, raw := range []string{"", "limit=52", "limit=52&offset=0", "limit=&offset", "=x", "a=1&a=2&b=3",
		"&&limit=1&", "a==b", "since=2026-01-01T00:00:00Z", "a=%41&b=c+d", "a=1;b=2&c=3", "a=%zz&b=1",
		"%zz=1&b=2", "k%3Dx=v%26w", "a=b=c", many} {
		want, _ := url.ParseQuery(raw)
		got := url.Values{}
		QueryInto(got, raw)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("QueryInto(%q) = %v, want %v", raw, got, want)
		}
	}
}

// A handler's own map and the values of a plain query cost one allocation: the value slice.
func TestQueryIntoKeepsTheMapOnTheCallersStack(t *testing.T) {
	allocs := testing.AllocsPerRun(100, func() {
		q := make(url.Values, 8)
		QueryInto(q, "limit=52")
		if q.Get("limit") != "52" {
			t.Fatal("limit not read")
		}
	})
	if allocs > 1 {
		t.Errorf("%v allocations, want at most 1", allocs)
	}
}
