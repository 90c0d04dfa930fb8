package events

import (
	"math/rand/v2"
	"time"
)

// Schedule is when failed deliveries are tried again: after the first failure Steps[0],
// after the second Steps[1], ..., then Steps' last step each time, each with up to Jitter
// (a fraction) more or less, until Horizon has passed since the event happened; then the
// event is given up (kept, marked, counted).
type Schedule struct {
	Steps   []time.Duration
	Jitter  float64
	Horizon time.Duration
}

// DefaultSchedule is docs/notifications.md's ("What arrives"): about 5 s, 30 s, 2 min, 10 min,
// 30 min, 1 h, then hourly, for 24 hours.
var DefaultSchedule = Schedule{
	Steps:   []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute, 10 * time.Minute, 30 * time.Minute, time.Hour},
	Jitter:  0.2,
	Horizon: 24 * time.Hour,
}

// Delay is the wait before the next attempt after failed attempts (1 after the first failure).
func (s Schedule) Delay(failed int) time.Duration {
	if len(s.Steps) == 0 {
		return 0
	}
	i := min(max(failed, 1), len(s.Steps)) - 1
	d := s.Steps[i]
	if s.Jitter > 0 {
		d += time.Duration((rand.Float64()*2 - 1) * s.Jitter * float64(d)) //nolint:gosec // jitter, not a secret
	}
	return d
}

// Expired tells whether an event that happened at happened is past the retry horizon at now.
func (s Schedule) Expired(happened, now time.Time) bool {
	return now.Sub(happened) >= s.Horizon
}
