// Package inflight holds what the in-flight marker of a Site is called and when it stops
// mattering, for the household core (which sets and reads the marker) and the manager's
// cache (which forgets a marker that no longer matters).
package inflight

import flexv1 "github.com/flexsite/flexsite/api/v1alpha1"

// Annotation holds a Site's in-flight marker (JSON of household.InFlight).
const Annotation = "flexsite.io/in-flight"

// Settled reports whether the site's marker, if any, binds nothing any more: the Site
// controller has evaluated the site, so the request that created it had written all of it
// (or the site is past caring). Every reader of the marker ignores it then.
func Settled(site *flexv1.Site) bool { return site.Status.ObservedGeneration > 0 }
