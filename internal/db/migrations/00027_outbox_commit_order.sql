-- The outbox in commit order, without a timer (docs/notifications.md "Order", docs/operations.md
-- "Delivery horizon").
--
-- Each event is stamped with its writer's transaction id (xid8: 64 bits, never wraps). The
-- fan-out takes only events whose writer's id is below the oldest transaction still running
-- (pg_snapshot_xmin(pg_current_snapshot())): every transaction before that has finished, so no
-- event can appear later before them. It takes them in (xid, id) order, from an index in that
-- order, and the deliveries of a subscription keep that order (event_xid, event_seq). Until
-- now a site's events were ordered by when they happened and held back 500 ms, so that one
-- that happened a moment earlier, committed a moment later by another controller, came first.
--
-- Rows written before this migration get xid 1: below any horizon, so they are delivered at
-- once, in the order they were written (their sequence) among themselves and before every
-- later event. A constant default adds the column without rewriting the table.

-- +goose Up
ALTER TABLE outbox ADD COLUMN xid xid8 NOT NULL DEFAULT '1';
ALTER TABLE outbox ALTER COLUMN xid SET DEFAULT pg_current_xact_id();
ALTER TABLE notification_deliveries ADD COLUMN event_xid xid8 NOT NULL DEFAULT '1';
ALTER TABLE notification_deliveries ALTER COLUMN event_xid DROP DEFAULT;

-- The fan-out's scan: the oldest events not yet fanned out, in commit-horizon order; it stops
-- at the horizon (and tells whether committed events wait beyond it).
DROP INDEX outbox_fan_out_order;
CREATE INDEX outbox_fan_out_order ON outbox (xid, id) WHERE fanned_out_at IS NULL;
-- The head-of-site check: an earlier event of the site still to be fanned out.
DROP INDEX outbox_to_fan_out;
CREATE INDEX outbox_to_fan_out ON outbox (organisation, site_id, xid, id) WHERE fanned_out_at IS NULL;
-- A subscription's pending deliveries per site (the head-of-site check) and in claim order.
DROP INDEX notification_deliveries_pending;
CREATE INDEX notification_deliveries_pending ON notification_deliveries (subscription_uid, site_id, event_xid, event_seq)
    WHERE state = 'pending';
DROP INDEX notification_deliveries_claim_order;
CREATE INDEX notification_deliveries_claim_order ON notification_deliveries (subscription_uid, event_xid, event_seq)
    WHERE state = 'pending' AND next_attempt_at IS NOT NULL;
-- When a subscription's next delivery falls due (Due: one index probe per subscription). As
-- with the claim order's, the predicate on next_attempt_at (never null) keeps the index out of
-- the head-of-site subqueries, which do not name it: there, without statistics, the planner
-- took it and filtered all of a subscription's pending rows for each row.
CREATE INDEX notification_deliveries_next_attempt ON notification_deliveries (subscription_uid, next_attempt_at)
    WHERE state = 'pending' AND next_attempt_at IS NOT NULL;

-- +goose Down
DROP INDEX notification_deliveries_next_attempt;
DROP INDEX notification_deliveries_claim_order;
CREATE INDEX notification_deliveries_claim_order ON notification_deliveries (subscription_uid, event_at, event_seq)
    WHERE state = 'pending' AND next_attempt_at IS NOT NULL;
DROP INDEX notification_deliveries_pending;
CREATE INDEX notification_deliveries_pending ON notification_deliveries (subscription_uid, site_id, event_at, event_seq)
    WHERE state = 'pending';
DROP INDEX outbox_to_fan_out;
CREATE INDEX outbox_to_fan_out ON outbox (organisation, site_id, id) WHERE fanned_out_at IS NULL;
DROP INDEX outbox_fan_out_order;
CREATE INDEX outbox_fan_out_order ON outbox (id) WHERE fanned_out_at IS NULL;
ALTER TABLE notification_deliveries DROP COLUMN event_xid;
ALTER TABLE outbox DROP COLUMN xid;
