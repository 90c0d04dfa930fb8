// Package resourceversion compares Kubernetes resource versions. They are opaque to clients
// in general, but the API server's are etcd revisions: numbers that grow with every write.
// Readers that must not act on a copy older than one they know of (a REST request's own
// writes, a reconciler's own status write) compare them here.
package resourceversion

import "strconv"

// NotOlder tells whether version have is at least version want; anything unparsable
// compares by equality.
func NotOlder(have, want string) bool {
	h, w, ok := parse(have, want)
	if !ok {
		return have == want
	}
	return h >= w
}

// Older tells whether version have is known to be older than want; unparsable versions are
// never known to be older.
func Older(have, want string) bool {
	h, w, ok := parse(have, want)
	return ok && h < w
}

func parse(have, want string) (h, w uint64, ok bool) {
	h, errH := strconv.ParseUint(have, 10, 64)
	w, errW := strconv.ParseUint(want, 10, 64)
	return h, w, errH == nil && errW == nil
}
