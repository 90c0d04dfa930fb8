// Package priority lets interactive work (a REST request someone is waiting on) go before
// background work (re-evaluating every site after a catalogue change) when both need the
// API server. The REST API marks its writing requests with Begin; a background reconcile
// holds a Slot while it works.
//
// While no interactive request is in flight (nor has been for a short linger), background
// work runs at its full concurrency. While one is, background work runs one at a time and
// paced to a share of the time: a slot held for d keeps the next one back for
// d×(1−share)/share. A background reconcile's time is mostly the API server's and etcd's
// work on its write, so on a machine where the API server is busy (slow writes) the pace
// slows by itself. Background work is never stopped, only thinned: a steady stream of
// requests slows a catalogue change down, it does not hold it back for ever.
package priority

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Defaults of NewGate.
const (
	// DefaultShare is the share of the time background work may hold its one slot while
	// interactive work is in flight.
	DefaultShare = 0.2
	// DefaultLinger is how long after the last interactive request ends background work
	// still counts it as in flight: a client's next request follows its last within
	// moments, and background work let loose in that gap would be in its way.
	DefaultLinger = 100 * time.Millisecond
)

// Gate counts interactive requests and hands out background slots.
type Gate struct {
	mu sync.Mutex
	// changed is closed (and replaced) whenever a slot may have become free.
	changed     chan struct{}
	interactive int
	running     int
	// lastEnd is when the last interactive request ended.
	lastEnd time.Time
	// notBefore is when the next slot may be handed out while interactive work is in flight.
	notBefore time.Time

	// max is the background concurrency when no interactive request is in flight.
	max int
	// whileBusy is the background concurrency while one is.
	whileBusy int
	share     float64
	linger    time.Duration
	now       func() time.Time

	// awaited carries the objects a reader waits on (Awaited) to the controller that works
	// on them (AwaitedWork).
	awaited chan types.NamespacedName
}

// awaitedBuffer bounds the asks of Awaited not taken yet (none are taken on a replica that
// does not lead): past it an ask is dropped, and its reader waits for the work's own turn.
const awaitedBuffer = 1024

// Options tune a Gate; zero values take the defaults.
type Options struct {
	// Share is the share of the time (0 < Share ≤ 1) background work may hold a slot while
	// interactive work is in flight.
	Share float64
	// Linger: see DefaultLinger.
	Linger time.Duration
	// Now is the clock (tests may replace it).
	Now func() time.Time
}

// NewGate allows max background slots at once, one (paced) while interactive work is in flight.
func NewGate(max int, opts ...Options) *Gate {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Share <= 0 || o.Share > 1 {
		o.Share = DefaultShare
	}
	if o.Linger <= 0 {
		o.Linger = DefaultLinger
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Gate{changed: make(chan struct{}), max: max, whileBusy: 1, share: o.Share, linger: o.Linger, now: o.Now,
		awaited: make(chan types.NamespacedName, awaitedBuffer)}
}

// Awaited asks for the background work on one object to go first: a reader is waiting on
// it (a GET of a site's eligibility while a catalogue change has yet to re-evaluate that
// site). It never blocks.
func (g *Gate) Awaited(namespace, name string) {
	select {
	case g.awaited <- types.NamespacedName{Namespace: namespace, Name: name}:
	default:
	}
}

// AwaitedWork is where Awaited's asks arrive, for the controller that does the work.
func (g *Gate) AwaitedWork() <-chan types.NamespacedName { return g.awaited }

// Begin marks an interactive request in flight; end marks it done.
func (g *Gate) Begin() (end func()) {
	g.mu.Lock()
	g.interactive++
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.interactive--
			g.lastEnd = g.now()
			g.wakeLocked()
			g.mu.Unlock()
		})
	}
}

// Slot waits for a background slot (or ctx's end) and returns its release.
func (g *Gate) Slot(ctx context.Context) (release func(), err error) {
	for {
		g.mu.Lock()
		ok, retryAt := g.tryLocked()
		if ok {
			g.running++
			start := g.now()
			g.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { g.releaseLocked(start) }) }, nil
		}
		wait := g.changed
		g.mu.Unlock()
		var timer *time.Timer
		var fire <-chan time.Time
		if !retryAt.IsZero() {
			timer = time.NewTimer(max(retryAt.Sub(g.now()), 0))
			fire = timer.C
		}
		select {
		case <-ctx.Done():
			stopTimer(timer)
			return func() {}, ctx.Err()
		case <-wait:
		case <-fire:
		}
		stopTimer(timer)
	}
}

// busyLocked tells whether interactive work is in flight, or ended less than linger ago
// (then also when that ends).
func (g *Gate) busyLocked(now time.Time) (busy bool, until time.Time) {
	if g.interactive > 0 {
		return true, time.Time{}
	}
	if until = g.lastEnd.Add(g.linger); now.Before(until) {
		return true, until
	}
	return false, time.Time{}
}

// tryLocked tells whether a slot is free now, and otherwise when to look again (zero: when
// something changes).
func (g *Gate) tryLocked() (ok bool, retryAt time.Time) {
	now := g.now()
	busy, busyUntil := g.busyLocked(now)
	if !busy {
		return g.running < g.max, time.Time{}
	}
	if g.running >= g.whileBusy {
		return false, time.Time{}
	}
	if now.Before(g.notBefore) {
		// Paced: look again when the pause is over, or when the interactive work is.
		retryAt = g.notBefore
		if !busyUntil.IsZero() && busyUntil.Before(retryAt) {
			retryAt = busyUntil
		}
		return false, retryAt
	}
	return true, time.Time{}
}

func (g *Gate) releaseLocked(start time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.running--
	now := g.now()
	if busy, _ := g.busyLocked(now); busy {
		held := now.Sub(start)
		pause := time.Duration(float64(held) * (1 - g.share) / g.share)
		if next := now.Add(pause); next.After(g.notBefore) {
			g.notBefore = next
		}
	}
	g.wakeLocked()
}

func stopTimer(t *time.Timer) {
	if t != nil {
		t.Stop()
	}
}

func (g *Gate) wakeLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}
