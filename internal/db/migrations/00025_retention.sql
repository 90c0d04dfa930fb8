-- Retention of what grows with time and nobody reads past a while (docs/operations.md,
-- "Retention"): the leader's hourly round (db.ReadingPartitions, its Expire) deletes
--   - EV schedule answers 90 days past the end of their window (schedulestore.DeleteExpired);
--   - asset events 13 months after they were received, except each asset's latest plug,
--     charge-now, intent and tariff event, which still say the asset's state
--     (asseteventstore.DeleteExpired);
--   - dispatch status changes 24 months after they were recorded, once their dispatch's window
--     is as old and the site's settlement of its flex event is recorded, or the dispatch was
--     cancelled (dispatchstore.DeleteExpiredStatusChanges).
-- Each deletes in batches found through these indexes, the oldest first.

-- +goose Up
CREATE INDEX ev_schedules_window_end ON ev_schedules (window_end);
CREATE INDEX asset_events_received ON asset_events (received_at);
CREATE INDEX dispatch_status_changes_recorded ON dispatch_status_changes (recorded_at);

-- +goose Down
DROP INDEX dispatch_status_changes_recorded;
DROP INDEX asset_events_received;
DROP INDEX ev_schedules_window_end;
