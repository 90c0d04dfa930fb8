package householdstore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	flexv1 "github.com/flexsite/flexsite/api/v1alpha1"
	"github.com/flexsite/flexsite/internal/household"
)

// maxRecordAttempts bounds the read-append-write loop against concurrent writers of a Site.
const maxRecordAttempts = 6

// RecordWithdrawal appends w to the site's enrolment history, unless the withdrawal of the
// same Enrolment is on record already, so that recording twice (unenrol, then the
// enrolment's finalizer) keeps one entry.
// It reads the site from fresh and writes with optimistic concurrency, so a concurrent writer
// of the status never loses an entry. A site that is gone or going needs no record. It
// reports whether this call recorded the withdrawal (so that it is told once).
func RecordWithdrawal(ctx context.Context, c client.Client, fresh client.Reader, site types.NamespacedName,
	w flexv1.EnrolmentPeriod) (bool, error) {
	for range maxRecordAttempts {
		current := &flexv1.Site{}
		if err := fresh.Get(ctx, site, current); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if !current.DeletionTimestamp.IsZero() || household.Recorded(current, w) {
			return false, nil
		}
		base := current.DeepCopy()
		current.Status.EnrolmentHistory = household.WithHistory(current.Status.EnrolmentHistory, w)
		err := c.Status().Patch(ctx, current, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{}))
		if !apierrors.IsConflict(err) {
			return err == nil, err
		}
	}
	return false, fmt.Errorf("recording the withdrawal of site %s from %s: still conflicting after %d attempts",
		site, w.Proposition, maxRecordAttempts)
}
