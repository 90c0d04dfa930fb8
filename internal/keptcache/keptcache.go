// Package keptcache is a cache kept while listening: what a replica read from PostgreSQL, kept
// per key for as long as it listens to the notifications of changes to it (LISTEN/NOTIFY), so
// that it is never staler than those notifications. The kept prices (internal/app/pricing) and
// the kept transactions pages (internal/app/rewards) are caches of it.
//
// The rules, in one place:
//   - It serves only while it listens: Reset(false) (the listening connection lost) drops
//     everything, and until Reset(true) nothing is served nor kept.
//   - The epoch rule: a read takes Begin's token before it asks the database, and what it read
//     is kept only if nothing was invalidated or reset since; so an answer read before an
//     invalidation is never served after it.
//   - A byte bound: every entry says what it costs; past the bound, arbitrary other entries make
//     room (their next read asks the database again), and an entry larger than the bound is
//     not kept.
package keptcache

import (
	"sync"
	"sync/atomic"
)

// Cache keeps values of V by key K. Values are read-only once kept: Keep replaces an entry
// whole. A nil *Cache keeps nothing. Safe for concurrent use: reads (Begin, Get, Lookup) share
// the lock, so that concurrent hot reads never wait for one another.
type Cache[K comparable, V any] struct {
	mu        sync.RWMutex
	entries   map[K]entry[V]
	bytes     int
	maxBytes  int
	epoch     uint64
	listening atomic.Bool
	report    func(bytes int)
}

type entry[V any] struct {
	value V
	cost  int
}

// New is an empty cache, not in use until Reset(true), that keeps at most maxBytes (as the
// entries count their cost) and tells report (nil: nobody) what it holds after each change.
func New[K comparable, V any](maxBytes int, report func(bytes int)) *Cache[K, V] {
	return &Cache[K, V]{entries: map[K]entry[V]{}, maxBytes: maxBytes, report: report}
}

// Begin is the token a read takes before it asks the database: 0 when the cache is not in use
// (Keep then keeps nothing).
func (c *Cache[K, V]) Begin() uint64 {
	if c == nil || !c.listening.Load() {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.epoch
}

// Get is the kept value of k, if there is one and the cache is in use.
func (c *Cache[K, V]) Get(k K) (V, bool) {
	var zero V
	if c == nil || !c.listening.Load() {
		return zero, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[k]
	if !ok {
		return zero, false
	}
	return e.value, true
}

// Lookup is Begin and Get at once (one lock): the read's token, and k's kept value if there is
// one and the cache is in use.
func (c *Cache[K, V]) Lookup(k K) (value V, epoch uint64, ok bool) {
	if c == nil || !c.listening.Load() {
		return value, 0, false
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	e, ok := c.entries[k]
	return e.value, c.epoch, ok
}

// Keep replaces k's entry by what update makes of it (old and had: the entry kept now; update
// answers the new value and its cost in bytes), for a read begun at epoch (Begin). Nothing is
// kept, and update is not called, when the cache was invalidated or reset since epoch, or is
// not in use. update runs under the cache's lock: it must not modify old (it may share its
// parts) nor call the cache.
func (c *Cache[K, V]) Keep(k K, epoch uint64, update func(old V, had bool) (V, int)) {
	if c == nil || epoch == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if epoch != c.epoch || !c.listening.Load() {
		return
	}
	defer c.tell()
	old, had := c.entries[k]
	value, cost := update(old.value, had)
	c.drop(k)
	if cost > c.maxBytes {
		return
	}
	for key := range c.entries {
		if c.bytes+cost <= c.maxBytes {
			break
		}
		c.drop(key)
	}
	c.entries[k] = entry[V]{value: value, cost: cost}
	c.bytes += cost
}

// drop forgets k's entry: the caller holds mu.
func (c *Cache[K, V]) drop(k K) {
	if old, ok := c.entries[k]; ok {
		c.bytes -= old.cost
		delete(c.entries, k)
	}
}

// Invalidate drops k's entry (it changed), and ends every read begun before (the epoch).
func (c *Cache[K, V]) Invalidate(k K) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.drop(k)
	c.tell()
}

// Reset drops everything and says whether the cache is in use: true once listening, false
// when the listening connection is lost or the listener stopped.
func (c *Cache[K, V]) Reset(listening bool) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.epoch++
	c.listening.Store(listening)
	clear(c.entries)
	c.bytes = 0
	c.tell()
}

// Listening tells whether the cache is in use.
func (c *Cache[K, V]) Listening() bool { return c != nil && c.listening.Load() }

// Bytes is what the kept entries cost.
func (c *Cache[K, V]) Bytes() int {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.bytes
}

// Len is how many entries are kept.
func (c *Cache[K, V]) Len() int {
	if c == nil {
		return 0
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.entries)
}

// tell reports the bytes held: the caller holds mu.
func (c *Cache[K, V]) tell() {
	if c.report != nil {
		c.report(c.bytes)
	}
}
