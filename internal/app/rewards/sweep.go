package rewards

import (
	"context"
	"time"
)

// SweepInterval is how often the link Sweeper looks for links nobody can use any more.
const SweepInterval = time.Minute

// resealBatch is how many bank details rows one sweep reseals under the active key.
const resealBatch = 100

// Sweeper deletes the links nobody can use any more (expired unredeemed, finished, or past
// their session), in the background: issuing a link costs no look at the others. After a key
// rotation it also reseals bank details under the active key, a batch a sweep, so that the
// old key can leave its Secret. It runs in the leader only (one sweep per cluster); a link
// that outlives its use by up to a minute harms nobody, since a dead link is refused whatever
// its row says.
type Sweeper struct {
	Rewards *Service
	// Interval between sweeps (default SweepInterval).
	Interval time.Duration
}

// NeedLeaderElection: one replica sweeps.
func (sw *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps every Interval until ctx ends.
func (sw *Sweeper) Start(ctx context.Context) error {
	interval := sw.Interval
	if interval <= 0 {
		interval = SweepInterval
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			sw.Rewards.SweepLinks(ctx)
		}
	}
}

// SweepLinks deletes the links nobody can use any more, and reseals a batch of bank details
// sealed with a key other than the active one (best effort: a failure is logged, and the next
// sweep tries again).
func (s *Service) SweepLinks(ctx context.Context) {
	if _, err := s.Private.SweepLinks(ctx, s.Now()); err != nil {
		s.Log.Error(err, "deleting spent rewards links")
	}
	if n, err := s.Private.Reseal(ctx, resealBatch); err != nil {
		s.Log.Error(err, "resealing bank details under the active key")
	} else if n > 0 {
		s.Log.Info("resealed bank details under the active key", "rows", n)
	}
}
