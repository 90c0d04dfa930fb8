package main

import (
	"context"
	"math"
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// timings are the durations of one batch of operations and the wall time it took.
type timings struct {
	durations []time.Duration
	wall      time.Duration
	// calls counts every completed call, warm-up included (runFor): the denominator of CPU
	// time measured around the whole run.
	calls int
}

// rate is operations per second of wall time.
func (t timings) rate() float64 {
	if t.wall <= 0 {
		return 0
	}
	return float64(len(t.durations)) / t.wall.Seconds()
}

func (t timings) percentileMS(p float64) float64 { return ms(percentile(t.durations, p)) }

// merge adds another batch of the same kind: durations pooled, wall times added.
func (t *timings) merge(o timings) {
	t.durations = append(t.durations, o.durations...)
	t.wall += o.wall
	t.calls += o.calls
}

// runConcurrent runs job(0..n-1) on c workers and times each job. The first error stops
// the batch: a failed request would make the figures meaningless.
func runConcurrent(ctx context.Context, n, c int, job func(ctx context.Context, i int) error) (timings, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	durations := make([]time.Duration, n)
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	start := time.Now()
	for range min(c, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := job(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				durations[i] = time.Since(t0)
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return timings{}, firstErr
	}
	if err := ctx.Err(); err != nil {
		return timings{}, err
	}
	return timings{durations: durations, wall: time.Since(start)}, nil
}

// runFor keeps c workers calling job for d after a warm-up of readWarmup (whose calls are not
// counted), and times each call. Requests per second are calls over d.
func runFor(ctx context.Context, c int, d time.Duration, job func(ctx context.Context, worker, i int) error) (timings, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make([][]time.Duration, c)
	var calls atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	measureFrom := time.Now().Add(readWarmup)
	stopAt := measureFrom.Add(d)
	for w := range c {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil; i++ {
				t0 := time.Now()
				if t0.After(stopAt) {
					return
				}
				if err := job(ctx, w, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
				calls.Add(1)
				// Only calls wholly inside the measured window count.
				if end := time.Now(); t0.After(measureFrom) && !end.After(stopAt) {
					results[w] = append(results[w], end.Sub(t0))
				}
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		return timings{}, firstErr
	}
	var t timings
	for _, r := range results {
		t.durations = append(t.durations, r...)
	}
	t.wall, t.calls = d, int(calls.Load())
	return t, ctx.Err()
}

// percentile is the nearest-rank percentile (p in 0..100) of the recorded durations.
func percentile(durations []time.Duration, p float64) time.Duration {
	if len(durations) == 0 {
		return 0
	}
	sorted := append([]time.Duration(nil), durations...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i] < sorted[j] })
	rank := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(rank, len(sorted)-1))]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

// ratio is a/b, or 0 when b is 0 (a figure that could not be measured).
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
