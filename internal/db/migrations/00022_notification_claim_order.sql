-- A subscription's pending deliveries in the order they are claimed (outboxstore.Claim: the
-- oldest event first). With only the per-site index (00014), each claim evaluated the
-- head-of-site condition on every pending row of the subscription and sorted them all: O(N)
-- per claim, O(N²) to deliver a burst of N (a flex event's dispatch.requested to 10,000
-- sites). In claim order the scan stops after the few rows it takes.
--
-- next_attempt_at is never null: the predicate only keeps the index out of the head-of-site
-- subqueries, which do not name that column (a strict comparison on it, as Claim's, implies it
-- and may use the index). Used there, the index would scan all of a subscription's earlier
-- pending rows for each row, filtering on the site: the per-site index finds them at once.

-- +goose Up
CREATE INDEX notification_deliveries_claim_order ON notification_deliveries (subscription_uid, event_at, event_seq)
    WHERE state = 'pending' AND next_attempt_at IS NOT NULL;

-- +goose Down
DROP INDEX notification_deliveries_claim_order;
