package app

import (
	"context"
	"errors"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/auth"
	"github.com/flexsite/flexsite/internal/eligibility"
	"github.com/flexsite/flexsite/internal/household"
)

// A site's eligibility is evaluated once, by the Site controller, into the site's status;
// the API serves that status (docs/architecture.md, "Eligibility"). The status says what it
// was computed from (observedGeneration, status.evaluatedFrom); a read compares that with
// the site, its assets and the catalogue in this replica's cache, which holds this caller's
// own writes (awaitCache), and serves the status only when they agree
// (household.CurrentEligibility). When the status is behind, the read waits for the
// controller's next one, woken by the cache's events, for eligibilityWaitTimeout at most,
// and then answers ErrEligibilityPending.

// eligibilityWaitTimeout bounds the wait for the Site controller's next status. The
// controller normally writes it within milliseconds of the change; past this, something
// holds it up (a backlog, a leader election), and the caller is told to come back.
const eligibilityWaitTimeout = 10 * time.Second

// eligibilityRecheck is how often a waiting read looks again when no event woke it: a
// catalogue change reaches this replica's rules after its informer event, with no Site or
// Asset event to follow.
const eligibilityRecheck = 100 * time.Millisecond

// ErrEligibilityPending answers a read of a site whose eligibility the Site controller has
// not evaluated from its current spec, assets and catalogue in time.
var ErrEligibilityPending = &Error{Kind: Unavailable,
	Detail: "The site's eligibility is being evaluated; retry shortly", RetryAfter: "1"}

// currentEligibility is the caller's site and the eligibility in its status, once current.
// The usual read finds it current at once, and costs no more than the lookups. encoded asks
// for the answer encoded too (body): a site's kept answer when it is still current
// (keptanswer.Eligibility, with res nil then), else the result encoded and kept.
func (s *Service) currentEligibility(ctx context.Context, p *auth.Principal, siteID string, encoded bool) (
	site *flexv1.Site, res *eligibility.Result, body EncodedJSON, err error) {
	site, res, body, err = s.evaluatedEligibility(ctx, p, siteID, encoded)
	if err != nil || res != nil || body != nil {
		return site, res, body, err
	}
	if s.EvaluateFirst != nil && site != nil {
		// Most often the controller is about to write it; behind a catalogue change's
		// fan-out over the fleet, this site goes first.
		s.EvaluateFirst(site.Namespace, site.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, eligibilityWaitTimeout)
	defer cancel()
	next := func() <-chan struct{} { return nil } // no events: the recheck alone
	if s.reads != nil {
		var done func()
		next, done = s.reads.changes.Watch()
		defer done()
	}
	for {
		// Taken before the look, so that an event during it is not missed.
		changed := next()
		site, res, body, err := s.evaluatedEligibility(ctx, p, siteID, encoded)
		if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, nil, nil, ErrEligibilityPending // the wait's end, met inside a lookup
		}
		if err != nil || res != nil || body != nil {
			return site, res, body, err
		}
		recheck := time.NewTimer(eligibilityRecheck)
		select {
		case <-ctx.Done():
			recheck.Stop()
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, nil, nil, ErrEligibilityPending
			}
			return nil, nil, nil, ctx.Err()
		case <-changed:
		case <-recheck.C:
		}
		recheck.Stop()
	}
}

// evaluatedEligibility is the caller's site and the eligibility in its status when it is
// current against this replica's cache (nil result and body when not yet). A site on its way
// out is evaluated no more: its last evaluation is served. encoded: as currentEligibility.
func (s *Service) evaluatedEligibility(ctx context.Context, p *auth.Principal, siteID string, encoded bool) (
	*flexv1.Site, *eligibility.Result, EncodedJSON, error) {
	kept := encoded && s.kept != nil
	var epoch uint64
	if kept {
		// The answer kept for this id while its site and assets are unchanged: no lookup.
		if site, body := s.kept.Current(p.Namespace, siteID, s.catalogue.Version()); body != nil && Reaches(p, site) {
			return site, nil, body, nil
		}
		epoch = s.kept.Epoch() // before the lookups
	}
	site, err := s.SiteToRead(ctx, p, siteID)
	if err != nil {
		return nil, nil, nil, err
	}
	if !site.DeletionTimestamp.IsZero() {
		if res, _ := household.EvaluatedEligibility(site); res != nil {
			return site, res, nil, nil
		}
		return nil, nil, nil, ErrSiteNotFound
	}
	assets, err := s.assetsToRead(ctx, site)
	if err != nil {
		return nil, nil, nil, err
	}
	if kept {
		if body := s.kept.Answer(site, assets, s.catalogue.Version(), epoch); body != nil {
			return site, nil, body, nil
		}
	}
	rules, version, err := s.rulesToRead(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	res := household.CurrentEligibility(site, assets, rules)
	if res == nil || !encoded {
		return site, res, nil, nil
	}
	body, err := EncodeEligibility(eligibilityRecord(site.Labels[flexv1.IDLabel], *res))
	if err != nil {
		return nil, nil, nil, err
	}
	if kept {
		s.kept.Keep(site, assets, version, epoch, body)
	}
	return site, res, body, nil
}

// assetsToRead are the site's cached Assets, read-only: from the informer's index when the
// cache has one, else listed.
func (s *Service) assetsToRead(ctx context.Context, site *flexv1.Site) ([]*flexv1.Asset, error) {
	if s.reads != nil {
		return s.reads.assetsOf(site)
	}
	listed, err := s.store(false).assetsOf(ctx, site)
	if err != nil {
		return nil, err
	}
	out := make([]*flexv1.Asset, len(listed))
	for i := range listed {
		out[i] = &listed[i]
	}
	return out, nil
}
