package facade

import (
	"testing"
	"time"
)

func TestKeyedLimiter(t *testing.T) {
	if newKeyedLimiter(Limit{}) != nil {
		t.Fatal("a zero limit is no limiter")
	}
	var off *keyedLimiter
	if !off.allow("x") || off.exhausted("x") {
		t.Fatal("no limiter allows everything")
	}

	l := newKeyedLimiter(Limit{Rate: 0.001, Burst: 2})
	for i, want := range []bool{true, true, false} {
		if got := l.allow("a"); got != want {
			t.Fatalf("request %d: allowed=%v, want %v (burst of 2)", i+1, got, want)
		}
	}
	if !l.allow("b") {
		t.Fatal("keys have their own buckets")
	}
	if l.exhausted("c") {
		t.Fatal("a fresh key is not exhausted")
	}
	l.charge("c")
	l.charge("c")
	if !l.exhausted("c") {
		t.Fatal("charged twice with a burst of 2: exhausted")
	}
	if got := l.retryAfter(); got != "1000" {
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
