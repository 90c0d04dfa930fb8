package household

import (
	"encoding/json"
	"time"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
)

// A REST request that creates a site writes it first and its assets and enrolments after it.
// If the process dies in between, the half-written site must not stay. Such a site is
// therefore created with an in-flight marker naming what the request will write and a
// deadline; the Site controller evaluates the site only once all of it exists, and deletes
// the site (its finalizer takes whatever children were written) if the deadline passes
// first. The happy path costs no extra write: the marker is set at creation, and the site's
// first status write ends its relevance.

// staleMarkerAfter: a marker whose deadline passed longer ago than this is ignored, so a site
// restored from a backup (with its old annotation) is never mistaken for an abandoned one.
const staleMarkerAfter = 10 * time.Minute

// InFlight names what the request that creates a site writes after it, and by when.
type InFlight struct {
	Until time.Time `json:"until"`
	// Assets are the names of the Asset objects the request writes.
	Assets []string `json:"assets,omitempty"`
	// Enrolments are the propositions the request enrols the site in.
	Enrolments []flexv1.PropositionName `json:"enrolments,omitempty"`
}

// Mark records the marker on a site about to be created.
func (m InFlight) Mark(site *flexv1.Site) {
	m.Until = m.Until.UTC().Truncate(time.Second)
	data, _ := json.Marshal(m) // a struct of strings and a time: cannot fail
	if site.Annotations == nil {
		site.Annotations = map[string]string{}
	}
	site.Annotations[flexv1.InFlightAnnotation] = string(data)
}

// InFlightState is where a marked site stands.
type InFlightState int

const (
	// NotInFlight: no marker binds the site (none, already evaluated once, unreadable or too
	// old to act on).
	NotInFlight InFlightState = iota
	// Writing: the request may still be writing; look again at the deadline.
	Writing
	// Written: everything the request named exists.
	Written
	// Abandoned: the deadline passed with objects missing; the request died half-way.
	Abandoned
)

// MarkerOf is the in-flight marker of a site not evaluated yet, if it carries one that binds
// it (readable, and not so long past its deadline that it must be a restored backup's).
func MarkerOf(site *flexv1.Site, now time.Time) (InFlight, bool) {
	raw, ok := site.Annotations[flexv1.InFlightAnnotation]
	if !ok || MarkerSpent(site) {
		return InFlight{}, false
	}
	var m InFlight
	if err := json.Unmarshal([]byte(raw), &m); err != nil || now.After(m.Until.Add(staleMarkerAfter)) {
		return InFlight{}, false
	}
	return m, true
}

// MarkerSpent says that a site's in-flight marker, if it carries one, binds nothing any more:
// the controller has evaluated the site (a positive observedGeneration; a site still being
// written reads -1), so it was complete (or past caring) back then.
func MarkerSpent(site *flexv1.Site) bool { return site.Status.ObservedGeneration > 0 }
