package householdstore

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
	"github.com/flexsite/flexsite/internal/index"
)

// Readers are where a use reads objects from: Cached first (a cache that may be behind), and
// Fresh (the API server) before a verdict a stale read could make wrong. A use that reads
// the API server only leaves Cached nil.
type Readers struct{ Cached, Fresh client.Reader }

// CheckInFlight tells where a marked site stands and, while Writing, how long to wait. It
// checks the named objects in r.Cached and, before declaring a site abandoned, in r.Fresh
// (the cache may simply be behind).
func CheckInFlight(ctx context.Context, r Readers, site *flexv1.Site, now time.Time) (
	household.InFlightState, time.Duration, error) {
	m, ok := household.MarkerOf(site, now)
	if !ok {
		return household.NotInFlight, 0, nil
	}
	cached, cachedLookup := r.Cached, index.NewLookup(r.Cached)
	if cached == nil {
		cached, cachedLookup = r.Fresh, index.NewAPIServerLookup(r.Fresh)
	}
	complete, err := written(ctx, m, cached, cachedLookup, site)
	if err != nil || complete {
		return household.Written, 0, err
	}
	if now.Before(m.Until) {
		return household.Writing, m.Until.Sub(now), nil
	}
	if complete, err = written(ctx, m, r.Fresh, index.NewAPIServerLookup(r.Fresh), site); err != nil || complete {
		return household.Written, 0, err
	}
	return household.Abandoned, 0, nil
}

// written reports whether every object the marker m names exists.
func written(ctx context.Context, m household.InFlight, r client.Reader, lookup index.Lookup, site *flexv1.Site) (bool, error) {
	for _, name := range m.Assets {
		err := r.Get(ctx, client.ObjectKey{Namespace: site.Namespace, Name: name}, &flexv1.Asset{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
	}
	if len(m.Enrolments) == 0 {
		return true, nil
	}
	enrolments, err := lookup.EnrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return false, err
	}
	for _, p := range m.Enrolments {
		if !slices.ContainsFunc(enrolments, func(e *flexv1.Enrolment) bool { return e.Spec.Proposition == p }) {
			return false, nil
		}
	}
	return true, nil
}
