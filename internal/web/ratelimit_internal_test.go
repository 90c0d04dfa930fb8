package web

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
	"time"
)

func TestKeyedLimiter(t *testing.T) {
	if NewKeyedLimiter(Limit{}) != nil {
		t.Fatal("a zero limit is no limiter")
	}
	var off *KeyedLimiter
	if !off.Allow("x") || off.Exhausted("x") {
		t.Fatal("no limiter allows everything")
	}

	l := NewKeyedLimiter(Limit{Rate: 0.001, Burst: 2})
	for i, want := range []bool{true, true, false} {
		if got := l.Allow("a"); got != want {
			t.Fatalf("request %d: allowed=%v, want %v (burst of 2)", i+1, got, want)
		}
	}
	if !l.Allow("b") {
		t.Fatal("keys have their own buckets")
	}
	if l.Exhausted("c") {
		t.Fatal("a fresh key is not exhausted")
	}
	l.Charge("c")
	l.Charge("c")
	if !l.Exhausted("c") {
		t.Fatal("charged twice with a burst of 2: exhausted")
	}
	if got := l.RetryAfter(); got != "1000" {
		t.Fatalf("retry after = %s, want 1000 (one token per 1000 s)", got)
	}

	// Idle buckets are swept so the map does not grow forever.
	now := time.Now()
	l.get("old", now.Add(-2*bucketIdleAfter))
	l.swept = now.Add(-2 * bucketIdleAfter)
	l.get("new", now)
	if _, ok := l.byKey["old"]; ok {
		t.Fatal("an idle bucket survived the sweep")
	}
}

func TestClientAddress(t *testing.T) {
	trusted := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("fd00::/8")}
	cases := []struct {
		name, remote string
		headers      map[string]string
		want         string
	}{
		{"a direct client", "198.51.100.9:5000", nil, "198.51.100.9"},
		{"a direct client's header is ignored", "198.51.100.9:5000", map[string]string{"X-Forwarded-For": "1.2.3.4"}, "198.51.100.9"},
		{"behind a trusted proxy", "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "203.0.113.7"}, "203.0.113.7"},
		{"a spoofed first hop is skipped", "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "1.2.3.4, 203.0.113.7, 10.9.9.9"},
			"203.0.113.7"},
		{"Forwarded wins over X-Forwarded-For", "10.1.2.3:5000",
			map[string]string{"Forwarded": `for=192.0.2.60;proto=http, for="[2001:db8::1]:4711"`, "X-Forwarded-For": "203.0.113.7"},
			"2001:db8::1"},
		{"a trusted proxy with no header", "10.1.2.3:5000", nil, "10.1.2.3"},
		{"a trusted IPv6 proxy", "[fd00::1]:5000", map[string]string{"X-Forwarded-For": "203.0.113.7"}, "203.0.113.7"},
		{"only proxies in the chain", "10.1.2.3:5000", map[string]string{"X-Forwarded-For": "10.4.4.4"}, "10.1.2.3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			r.RemoteAddr = tc.remote
			for k, v := range tc.headers {
				r.Header.Set(k, v)
			}
			if got := ClientAddress(r, trusted); got != tc.want {
				t.Errorf("ClientAddress = %q, want %q", got, tc.want)
			}
		})
	}
}
