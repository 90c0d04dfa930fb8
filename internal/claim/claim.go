// Package claim is the rule Flexsite's reservations share: an MPANClaim reserving a meter
// point for a Site, a UsernameClaim reserving a login name for an APIClient. A claim is an
// object named after what it reserves, so two claimants race for one name and the API server
// lets exactly one create it. What a claim is worth depends on its holder: it binds while the
// holder holds what it reserves; for a grace period after it was made it is pending (the
// holder is still being written); after that it is stale, and anyone may replace it.
package claim

import "time"

// Standing is what a claim is worth now.
type Standing int

const (
	// Held: its holder holds what the claim reserves.
	Held Standing = iota
	// Pending: its holder does not hold it (yet), within the grace period of the claim.
	Pending
	// Stale: its holder does not hold it, past the grace period.
	Stale
)

// Judge tells a claim's standing: held says whether its holder (existing, not being deleted)
// holds what the claim reserves; claimedAt is when the claim was made.
func Judge(held bool, claimedAt time.Time, grace time.Duration, now time.Time) Standing {
	switch {
	case held:
		return Held
	case now.Before(claimedAt.Add(grace)):
		return Pending
	default:
		return Stale
	}
}
