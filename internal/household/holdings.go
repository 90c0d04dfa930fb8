package household

import (
	"fmt"
	"strings"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A site may be deleted on its own (DELETE /entities/site/{site_id}) only while it holds
// nothing: deleting it takes its children with it (DeleteChildren, the Site finalizer), and
// a household's assets, enrolments and reward history are removed only by an offboard, which
// says so. Children already on their way out no longer count.

// Holdings are what a site holds that deleting it would take with it.
type Holdings struct {
	Assets     int
	Enrolments int
	// Ledgers are its RewardLedgers: the household's reward history.
	Ledgers int
	// Onboarding: a request that created the site is still writing what it named (InFlight),
	// so the site is about to hold assets or enrolments.
	Onboarding bool
}

// HoldingsOf counts a site's live children and notes a request still writing them.
func HoldingsOf(assets []flexv1.Asset, enrolments []flexv1.Enrolment, ledgers []flexv1.RewardLedger,
	inFlight InFlightState) Holdings {
	h := Holdings{Onboarding: inFlight == Writing}
	for i := range assets {
		if assets[i].DeletionTimestamp.IsZero() {
			h.Assets++
		}
	}
	for i := range enrolments {
		if enrolments[i].DeletionTimestamp.IsZero() {
			h.Enrolments++
		}
	}
	for i := range ledgers {
		if ledgers[i].DeletionTimestamp.IsZero() {
			h.Ledgers++
		}
	}
	return h
}

// Empty reports whether the site holds nothing.
func (h Holdings) Empty() bool { return h == Holdings{} }

// String says what the site holds, e.g. "2 assets, 1 enrolment and a reward ledger".
func (h Holdings) String() string {
	var parts []string
	count := func(n int, one, many string) {
		switch {
		case n == 1:
			parts = append(parts, "1 "+one)
		case n > 1:
			parts = append(parts, fmt.Sprintf("%d %s", n, many))
		}
	}
	count(h.Assets, "asset", "assets")
	count(h.Enrolments, "enrolment", "enrolments")
	switch {
	case h.Ledgers == 1:
		parts = append(parts, "a reward ledger")
	case h.Ledgers > 1:
		parts = append(parts, fmt.Sprintf("%d reward ledgers", h.Ledgers))
	}
	if h.Onboarding {
		parts = append(parts, "an onboarding still in progress")
	}
	switch len(parts) {
	case 0:
		return "nothing"
	case 1:
		return parts[0]
	}
	return strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
}
