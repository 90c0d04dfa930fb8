package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// A connection whose refresh keeps failing transiently is retried by the controller's
// workqueue rate limiter, 1 s doubling to 5 min, each connection on its own count, which a
// reconcile that succeeds resets (the workqueue's Forget). On main a map of the reconciler
// counted the failures beside the workqueue's own limiter.
func TestRefreshRateLimiter(t *testing.T) {
	rl := refreshRateLimiter()
	a := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "org", Name: "a"}}
	b := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "org", Name: "b"}}
	for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second} {
		if got := rl.When(a); got != want {
			t.Fatalf("failure %d: retry after %v, want %v", i+1, got, want)
		}
	}
	if got := rl.When(b); got != time.Second {
		t.Fatalf("another connection's first failure: retry after %v, want 1s", got)
	}
	for range 20 {
		rl.When(a)
	}
	if got := rl.When(a); got != 5*time.Minute {
		t.Fatalf("after many failures: retry after %v, want 5m", got)
	}
	rl.Forget(a)
	if got := rl.When(a); got != time.Second {
		t.Fatalf("after a success: retry after %v, want 1s", got)
	}
}
