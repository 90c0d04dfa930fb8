package delivery

import (
	"testing"
	"time"
)

// A subscription's queue of claimed deliveries is as deep as Workers + Lookahead while its
// receiver answers quickly, and shrinks (never below Workers) when it answers so slowly that
// the queue would not be posted within half the lease's usable part: deliveries that waited
// past it would be dropped unposted and claimed again a lease later.
func TestQueueDepthFollowsTheReceiversPace(t *testing.T) {
	st := &subState{d: &Deliverer{Workers: 16, Lookahead: 112, Lease: time.Minute}}
	if got := st.depth(); got != 128 {
		t.Fatalf("before any POST: depth %d, want 128", got)
	}
	st.posted(5 * time.Millisecond)
	if got := st.depth(); got != 128 {
		t.Fatalf("a fast receiver: depth %d, want 128", got)
	}
	// 50 s usable (a minute's lease less the 10 s timeout), half of it at 10 s a POST over 16
	// workers: 40 deliveries.
	st = &subState{d: st.d}
	st.posted(10 * time.Second)
	if got := st.depth(); got != 40 {
		t.Fatalf("a receiver taking 10 s: depth %d, want 40", got)
	}
	st = &subState{d: st.d}
	st.posted(time.Hour)
	if got := st.depth(); got != 16 {
		t.Fatalf("a receiver slower than the lease: depth %d, want the workers' 16", got)
	}
	for range 100 {
		st.posted(5 * time.Millisecond)
	}
	if got := st.depth(); got != 128 {
		t.Fatalf("the receiver fast again: depth %d, want 128", got)
	}
}
