package rewards

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// SweepInterval is how often the link Sweeper looks for links nobody can use any more.
const SweepInterval = time.Minute

// Sweeper deletes the link Secrets nobody can use any more (expired unredeemed, finished, or
// past their session), in the background: issuing a link costs no listing of the others. It
// runs in the leader only (one sweep per cluster); a link that outlives its use by up to a
// minute harms nobody, since a dead link is refused whatever its Secret says.
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

// SweepLinks deletes the link Secrets nobody can use any more (best effort: a failure is
// logged, and the next sweep tries again).
func (s *Service) SweepLinks(ctx context.Context) {
	now := s.Now()
	list := &corev1.SecretList{}
	if err := s.APIReader.List(ctx, list, client.InNamespace(s.HostedNamespace),
		client.MatchingLabels{flexv1.RewardsLinkLabel: linkMarked}); err != nil {
		s.Log.Error(err, "listing rewards links")
		return
	}
	for i := range list.Items {
		link, err := decodeLink(&list.Items[i])
		if err == nil && !link.dead(now) {
			continue
		}
		if err := s.Client.Delete(ctx, &list.Items[i], client.Preconditions{ResourceVersion: &list.Items[i].ResourceVersion}); err != nil &&
			!apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			s.Log.Error(err, "deleting a spent rewards link")
		}
	}
}
