// Package claiming is the claim protocol against the API server, once for every claim
// Flexsite makes (internal/claim's rule: a claim is an object named after what it reserves):
// an MPANClaim for a Site (internal/householdstore), a UsernameClaim for an APIClient
// (internal/tenancy).
//
// The protocol: create the claim, then look for another holder (one that holds what the claim
// reserves without a claim, or by another way), withdrawing the claim when there is one. When
// the claim exists already, read it from the API server: the claimant's own that still binds
// is kept; a stale one (anyone's) is deleted with preconditions and the claim made again; one of
// another claimant that binds (held, or pending within its grace) refuses. Two claimants that
// meet at once meet at the claim's name, where the API server lets one create it.
package claiming

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	claimrule "github.com/flexsite/flexsite/internal/claim"
)

// Attempts bounds how often Claim makes its claim again: after a stale claim it replaced, or a
// claim withdrawn between its Create and its read. Each attempt past the first follows another
// claimant's claim going away, so the bound is how many such racers one claim outlasts before
// it gives up (an error the caller answers as a failure to retry, never as a refusal); an
// uncontended claim takes one. Six: the larger of the two bounds the username and MPAN claims
// had, so that neither gives up sooner than before.
const Attempts = 6

// Claimant is one claim being made, of claims of type T.
type Claimant[T any, C interface {
	*T
	client.Object
}] struct {
	// Want is the claim to make: a new object each call (Create fills it in).
	Want func() C
	// Judge tells what a stored claim (read from the API server) is worth now, and whether it
	// is the claimant's own.
	Judge func(ctx context.Context, existing C) (own bool, standing claimrule.Standing, err error)
	// OtherHolder reports, as a refusal, a holder of what the claim reserves other than the
	// claimant, found other than by the claim; nil when there is none.
	OtherHolder func() error
	// Taken is the refusal of another claimant's claim that binds (held or pending).
	Taken func(existing C, standing claimrule.Standing) error
	// What names what is claimed, for errors: `MPAN 1200000000011 for site s`.
	What string
	// DryRun: write nothing, and answer what a real claim would meet now.
	DryRun bool
}

// Claim runs the protocol for c. It answers the claim when this call created it, or may have
// (its Create failed in a way that does not prove it was refused: a timeout may hide a stored
// claim), so that a caller whose request then fails can delete it; nil when the claimant held
// its claim already, or refused. fresh must read from the API server, not a cache.
func Claim[T any, C interface {
	*T
	client.Object
}](ctx context.Context, w client.Client, fresh client.Reader, c Claimant[T, C]) (C, error) {
	for range Attempts {
		claim := c.Want()
		if !c.DryRun {
			err := w.Create(ctx, claim)
			if err == nil {
				if err := c.OtherHolder(); err != nil {
					// Withdrawn by its UID: this call's claim, never one made after it went.
					uid := claim.GetUID()
					if delErr := w.Delete(ctx, claim, client.Preconditions{UID: &uid}); client.IgnoreNotFound(delErr) != nil &&
						!apierrors.IsConflict(delErr) {
						return claim, fmt.Errorf("%w (and withdrawing the claim: %w)", err, delErr)
					}
					return nil, err
				}
				return claim, nil
			}
			if !apierrors.IsAlreadyExists(err) {
				return claim, fmt.Errorf("claiming %s: %w", c.What, err)
			}
		}
		existing := C(new(T))
		if err := fresh.Get(ctx, client.ObjectKeyFromObject(claim), existing); err != nil {
			if !apierrors.IsNotFound(err) {
				return nil, err
			}
			if c.DryRun {
				return nil, c.OtherHolder()
			}
			continue // withdrawn meanwhile: claim again
		}
		own, standing, err := c.Judge(ctx, existing)
		if err != nil {
			return nil, err
		}
		switch {
		case own && standing != claimrule.Stale:
			// The claimant's own: re-applied, or retried after a failed write.
			return nil, c.OtherHolder()
		case standing == claimrule.Stale && c.DryRun:
			return nil, c.OtherHolder()
		case standing == claimrule.Stale:
			// Replace it, even when it is the claimant's own: a fresh claim is what makes a
			// racer that reads it now back off. The precondition keeps us from deleting a
			// claim made a moment ago by someone else.
			uid, rv := existing.GetUID(), existing.GetResourceVersion()
			err := w.Delete(ctx, existing, client.Preconditions{UID: &uid, ResourceVersion: &rv})
			if client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
				return nil, err
			}
		default:
			return nil, c.Taken(existing, standing)
		}
	}
	return nil, fmt.Errorf("claiming %s: still contended after %d attempts", c.What, Attempts)
}
