// Package resourceversion decides what a reader may conclude from two resource versions of
// one object. They are opaque to clients in general, but the API server's are etcd
// revisions that apimachinery compares (util/resourceversion). Readers that must not act on
// a copy older than one they know of (a REST request's own writes, a reconciler's own
// status write) ask here; what a version that does not compare means is decided here too.
package resourceversion

import "k8s.io/apimachinery/pkg/util/resourceversion"

// NotOlder tells whether version have is at least version want; versions that do not
// compare are equal or not.
func NotOlder(have, want string) bool {
	cmp, err := resourceversion.CompareResourceVersion(have, want)
	if err != nil {
		return have == want
	}
	return cmp >= 0
}

// Older tells whether version have is known to be older than want; versions that do not
// compare are never known to be older.
func Older(have, want string) bool {
	cmp, err := resourceversion.CompareResourceVersion(have, want)
	return err == nil && cmp < 0
}
