package dispatchstore

import (
	"context"
	"time"

	"github.com/flexsite/flexsite/internal/db"
)

// StatusChangesRetentionMonths is how long a dispatch's status changes (who reported what,
// when) are kept after they were recorded. Settlement never reads them (it is measured: a
// household that flexed is paid whatever the callback said), nor do the counts or the rewards
// page (they read the dispatch's current status, kept with the dispatch). They are the record
// of what the device was asked and answered, for questions about a credit: kept two years, and
// never before the site's settlement of the flex event is recorded (DeleteExpiredStatusChanges).
const StatusChangesRetentionMonths = 24

// DeleteExpiredStatusChanges deletes the status changes recorded more than
// StatusChangesRetentionMonths before now of dispatches whose window ended as long ago and
// that either were cancelled (their event was deleted before its end: never settled) or whose
// site's settlement of their flex event is recorded (settled or skipped, exactly once:
// flex_event_settlements). A dispatch whose site's settlement is still to come keeps them
// however old. The dispatch itself and its current status stay. It answers how many it
// deleted (the leader's retention sweep, db.ReadingPartitions).
func (s *Store) DeleteExpiredStatusChanges(ctx context.Context, now time.Time) (int64, error) {
	n, err := db.DeleteInBatches(ctx, s.Pool, `DELETE FROM dispatch_status_changes WHERE id IN (
		SELECT c.id FROM dispatch_status_changes c JOIN dispatches d USING (organisation, event_id)
		WHERE c.recorded_at < $2 AND d.to_time < $2
		AND (d.status = 'cancelled' OR EXISTS (SELECT 1 FROM flex_event_settlements st
			WHERE st.organisation = d.organisation AND st.event_id = d.flex_event AND st.site_id = d.site_id))
		ORDER BY c.recorded_at LIMIT $1)`, now.UTC().AddDate(0, -StatusChangesRetentionMonths, 0))
	return n, s.classify(err)
}
