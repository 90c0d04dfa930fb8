// Package controllers holds one reconciler per Flexsite kind: Site (eligibility into status,
// cleanup of a site's children), Asset (identity, site reference) and Enrolment (active, not
// eligible or withdrawn; withdrawal bookkeeping).
package controllers

import (
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
)

// conflictRetryDelay is how soon a reconcile that lost an optimistic-concurrency race runs
// again: the watch event that made our copy stale is usually already queued.
const conflictRetryDelay = 200 * time.Millisecond

// resultFor turns the outcome of a reconcile into the controller's answer, in one place:
//   - nil: done; watches bring the next change;
//   - a conflict: the cached copy was stale; retry soon, quietly (not an error to log);
//   - anything else: returned, so controller-runtime logs it and retries with backoff.
func resultFor(err error) (ctrl.Result, error) {
	switch {
	case err == nil:
		return ctrl.Result{}, nil
	case apierrors.IsConflict(err):
		return ctrl.Result{RequeueAfter: conflictRetryDelay}, nil
	default:
		return ctrl.Result{}, err
	}
}
