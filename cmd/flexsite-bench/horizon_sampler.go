package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Who holds the delivery horizon back (docs/notifications.md, "Order and latency"): while a
// phase runs, the bench asks PostgreSQL every few milliseconds which running write transaction
// is the oldest (the one pg_snapshot_xmin names) and for how long it has run, and reports, by
// its session's state and wait (ClientWrite: PostgreSQL waits for the client to read) and the
// statement it is running (or last ran), how often it was the oldest and the longest it had
// run when seen. Reported only: it explains a figure, it is none.

// horizonSampleEvery is the sampler's period.
const horizonSampleEvery = 5 * time.Millisecond

type horizonHolder struct {
	statement string
	seen      int
	longest   time.Duration
}

type horizonSampler struct {
	mu      sync.Mutex
	samples int
	by      map[string]*horizonHolder
	stop    context.CancelFunc
	done    chan struct{}
}

// sampleHorizon starts sampling; stop it with (*horizonSampler).finish.
func (b *bench) sampleHorizon(ctx context.Context) *horizonSampler {
	ctx, cancel := context.WithCancel(ctx)
	s := &horizonSampler{by: map[string]*horizonHolder{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		t := time.NewTicker(horizonSampleEvery)
		defer t.Stop()
		for {
			var stmt string
			var ran time.Duration
			err := b.db.QueryRow(ctx, `SELECT coalesce(state, '') || coalesce(' waiting ' || wait_event_type || '/' || wait_event, '')
					|| ': ' || left(regexp_replace(query, '\s+', ' ', 'g'), 70), clock_timestamp() - xact_start
				FROM pg_stat_activity WHERE backend_xid IS NOT NULL AND datname = current_database() AND pid <> pg_backend_pid()
				ORDER BY age(backend_xid) DESC LIMIT 1`).Scan(&stmt, &ran)
			s.mu.Lock()
			s.samples++
			if err == nil {
				h := s.by[stmt]
				if h == nil {
					h = &horizonHolder{statement: stmt}
					s.by[stmt] = h
				}
				h.seen++
				h.longest = max(h.longest, ran)
			}
			s.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// finish stops the sampler and says what it saw: the samples, and the holders seen most.
func (s *horizonSampler) finish() string {
	s.stop()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	hs := make([]*horizonHolder, 0, len(s.by))
	held := 0
	for _, h := range s.by {
		hs = append(hs, h)
		held += h.seen
	}
	slices.SortFunc(hs, func(a, b *horizonHolder) int { return b.seen - a.seen })
	var out strings.Builder
	fmt.Fprintf(&out, "%d samples, a write transaction running in %d", s.samples, held)
	for _, h := range hs[:min(len(hs), 6)] {
		fmt.Fprintf(&out, "; %d× (longest %v) %q", h.seen, h.longest.Round(time.Millisecond), h.statement)
	}
	return out.String()
}
