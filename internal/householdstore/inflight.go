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
// the API server only leaves Cached nil. FreshLookup is how Fresh finds a site's children
// (nil: index.NewAPIServerLookup, a LIST, for a controller; a request path, which may not
// LIST, passes index.NewFreshLookup).
type Readers struct {
	Cached, Fresh client.Reader
	FreshLookup   index.Lookup
}

func (r Readers) freshLookup() index.Lookup {
	if r.FreshLookup != nil {
		return r.FreshLookup
	}
	return index.NewAPIServerLookup(r.Fresh)
}

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
		cached, cachedLookup = r.Fresh, r.freshLookup()
	}
	complete, err := written(ctx, m, cached, cachedLookup, site)
	if err != nil || complete {
		return household.Written, 0, err
	}
	if now.Before(m.Until) {
		return household.Writing, m.Until.Sub(now), nil
	}
	if complete, err = written(ctx, m, r.Fresh, r.freshLookup(), site); err != nil || complete {
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
	// The request that marked the site writes its enrolments under the names it derives from
	// the site and the proposition (household.NewEnrolment): read by GET. Only one not found
	// there is looked for among the site's enrolments (one declared under another name).
	var missing []flexv1.PropositionName
	for _, p := range m.Enrolments {
		e, err := NamedEnrolment(ctx, r, site, p)
		if err != nil {
			return false, err
		}
		if e == nil {
			missing = append(missing, p)
		}
	}
	if len(missing) == 0 {
		return true, nil
	}
	enrolments, err := lookup.EnrolmentsOfSite(ctx, site.Namespace, site.Name)
	if err != nil {
		return false, err
	}
	for _, p := range missing {
		if !slices.ContainsFunc(enrolments, func(e *flexv1.Enrolment) bool { return e.Spec.Proposition == p }) {
			return false, nil
		}
	}
	return true, nil
}
