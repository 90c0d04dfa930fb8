package index

import (
	"testing"
	"time"
)

// A read waiting for a site's next status wakes at the next cache event, and an event with
// nobody waiting costs nothing.
func TestChangesWakeWaiters(t *testing.T) {
	c := &Changes{}
	c.notify() // nobody waits
	next, done := c.Watch()
	changed := next()
	select {
	case <-changed:
		t.Fatal("woken before any event")
	default:
	}
	c.notify()
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("not woken by the event")
	}
	again := next()
	select {
	case <-again:
		t.Fatal("the next wait ended by an earlier event")
	default:
	}
	done()
	if c.waiters != 0 {
		t.Fatalf("%d waiters after done", c.waiters)
	}
}
