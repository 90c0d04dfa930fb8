package db

import "sync"

// Changes carries what a listener (Watch) is told to a goroutine that acts on it at its own
// pace: Watch's callbacks must not block, the consumer may be slow. Note and Resync only
// record (a burst of one key is kept once) and wake the consumer; the consumer waits on Wake
// and Takes everything recorded since. Nothing recorded is lost: what is noted while the
// consumer works is taken on its next round.
type Changes[K comparable] struct {
	mu      sync.Mutex
	pending map[K]bool
	resync  bool
	wake    chan struct{}
}

// NewChanges is an empty set of changes.
func NewChanges[K comparable]() *Changes[K] {
	return &Changes[K]{pending: map[K]bool{}, wake: make(chan struct{}, 1)}
}

// Note records a changed key; it never blocks.
func (c *Changes[K]) Note(key K) { c.record(func() { c.pending[key] = true }) }

// Resync records that anything may have changed unheard (the listener listens again after a
// lost connection); it never blocks.
func (c *Changes[K]) Resync() { c.record(func() { c.resync = true }) }

func (c *Changes[K]) record(f func()) {
	c.mu.Lock()
	f()
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default: // a wake-up is pending already: it takes this change too
	}
}

// Wake receives once something was recorded since the last Take began.
func (c *Changes[K]) Wake() <-chan struct{} { return c.wake }

// Take empties the set: the keys noted since the last Take, and whether a resync was asked.
func (c *Changes[K]) Take() (map[K]bool, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out, resync := c.pending, c.resync
	c.pending, c.resync = map[K]bool{}, false
	return out, resync
}
