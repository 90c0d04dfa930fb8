// Package priority lets interactive work (a REST request someone is waiting on) go before
// background work (re-evaluating every site after a catalogue change) when both need the
// API server. The REST facade marks its writing requests with Begin; a background reconcile
// holds a Slot while it works. While any interactive request is in flight, background work
// runs one at a time; otherwise up to its full concurrency. Background work is never
// stopped, only thinned: a steady stream of requests slows a catalogue change down, it does
// not hold it back for ever.
package priority

import (
	"context"
	"sync"
)

// Gate counts interactive requests and hands out background slots.
type Gate struct {
	mu sync.Mutex
	// changed is closed (and replaced) whenever a slot may have become free.
	changed     chan struct{}
	interactive int
	running     int
	// max is the background concurrency when no interactive request is in flight.
	max int
	// whileBusy is the background concurrency while one is.
	whileBusy int
}

// NewGate allows max background slots at once, one while interactive work is in flight.
func NewGate(max int) *Gate {
	return &Gate{changed: make(chan struct{}), max: max, whileBusy: 1}
}

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
			g.wakeLocked()
			g.mu.Unlock()
		})
	}
}

// Slot waits for a background slot (or ctx's end) and returns its release.
func (g *Gate) Slot(ctx context.Context) (release func(), err error) {
	for {
		g.mu.Lock()
		limit := g.max
		if g.interactive > 0 {
			limit = g.whileBusy
		}
		if g.running < limit {
			g.running++
			g.mu.Unlock()
			var once sync.Once
			return func() {
				once.Do(func() {
					g.mu.Lock()
					g.running--
					g.wakeLocked()
					g.mu.Unlock()
				})
			}, nil
		}
		wait := g.changed
		g.mu.Unlock()
		select {
		case <-ctx.Done():
			return func() {}, ctx.Err()
		case <-wait:
		}
	}
}

func (g *Gate) wakeLocked() {
	close(g.changed)
	g.changed = make(chan struct{})
}
