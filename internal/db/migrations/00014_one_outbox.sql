-- One outbox for every notification (docs/notifications.md, "How it works (for operators)").
--
-- outbox holds every event, whoever writes it: a credit's in the SQL transaction of the credit
-- (internal/rewardstore, internal/settlementstore), a controller's once it observes the change
-- (internal/outboxstore.Report). Until now its rows were handed over to the RewardLedgers'
-- status outboxes (capped at 16) and marked delivered: now nothing leaves it before delivery.
--
-- Delivery is per subscription: the fan-out (any replica, FOR UPDATE SKIP LOCKED) gives each
-- event one notification_deliveries row per subscription that wants it, then marks the event
-- fanned out; workers of any replica claim the due rows (a lease, claimed_until), post them
-- outside any transaction, and record the outcome. A site's next event (in the order they
-- happened) is claimed for a subscription only once its previous one is delivered or given up,
-- and never while an earlier event of the site is still to be fanned out. Nothing is capped and nothing dropped:
-- a row past the 24 h horizon is kept, marked given_up, and counted.

-- +goose Up

-- Event ids are unique per organisation (an organisation's ids say nothing about another's).
ALTER TABLE outbox DROP CONSTRAINT outbox_event_id_key;
ALTER TABLE outbox ADD CONSTRAINT outbox_event_unique UNIQUE (organisation, event_id);
-- The ping of the test endpoint is addressed to one subscription (its uid); site_id '' then.
ALTER TABLE outbox ADD COLUMN subscription_uid text;
-- When the event got its delivery rows (NULL: not yet).
ALTER TABLE outbox ADD COLUMN fanned_out_at timestamptz;
-- Rows handed over before the upgrade were the status outboxes' (which go with it).
UPDATE outbox SET fanned_out_at = delivered_at WHERE delivered_at IS NOT NULL;
DROP INDEX outbox_pending;
ALTER TABLE outbox DROP COLUMN delivered_at;
CREATE INDEX outbox_to_fan_out ON outbox (organisation, site_id, id) WHERE fanned_out_at IS NULL;
CREATE INDEX outbox_fanned_out ON outbox (fanned_out_at);

CREATE TABLE notification_deliveries (
    subscription_uid text        NOT NULL,
    event_seq        bigint      NOT NULL REFERENCES outbox (id) ON DELETE CASCADE,
    organisation     text        NOT NULL,
    site_id          text        NOT NULL,
    -- when the event happened: a site's events go to a subscription in this order (then the
    -- sequence's), whichever writer's commit came first.
    event_at         timestamptz NOT NULL,
    state            text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'delivered', 'given_up')),
    attempts         integer     NOT NULL DEFAULT 0,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    -- a worker's lease: until then no other worker claims the row; a worker that dies
    -- mid-delivery lets it expire, and the event is delivered again (same webhook-id).
    claimed_until    timestamptz,
    done_at          timestamptz,
    PRIMARY KEY (subscription_uid, event_seq)
);
CREATE INDEX notification_deliveries_pending ON notification_deliveries (subscription_uid, site_id, event_at, event_seq)
    WHERE state = 'pending';
CREATE INDEX notification_deliveries_event ON notification_deliveries (event_seq);

-- Every attempt, for GET /notifications/subscriptions/{id}/deliveries and the status's recent
-- deliveries (the newest per subscription are kept: see outboxstore.keptAttempts).
CREATE TABLE notification_attempts (
    id               bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    subscription_uid text        NOT NULL,
    organisation     text        NOT NULL,
    event_id         text        NOT NULL,
    event_type       text        NOT NULL,
    attempt          integer     NOT NULL,
    status_code      integer,
    error            text,
    at               timestamptz NOT NULL,
    latency_ms       bigint      NOT NULL
);
CREATE INDEX notification_attempts_recent ON notification_attempts (subscription_uid, id);

-- A subscription's counts and last outcome, which every replica's outcomes update and the
-- Subscription's status shows.
CREATE TABLE notification_subscriptions (
    subscription_uid     text        PRIMARY KEY,
    organisation         text        NOT NULL,
    delivered            bigint      NOT NULL DEFAULT 0,
    failed_attempts      bigint      NOT NULL DEFAULT 0,
    given_up             bigint      NOT NULL DEFAULT 0,
    consecutive_failures integer     NOT NULL DEFAULT 0,
    last_outcome         text,
    last_at              timestamptz,
    last_status          integer,
    last_latency_ms      bigint,
    last_error           text
);

-- What a controller last reported of an object (a digest of the events it wrote): a reconcile
-- redone after a conflict or a crash finds its events written already and writes none.
CREATE TABLE notification_reported (
    organisation text        NOT NULL,
    subject      text        NOT NULL,
    digest       text        NOT NULL,
    reported_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, subject)
);

-- Deliverers listen: an event written, or delivery rows made, wakes them at once (they also
-- look at an interval).
-- +goose StatementBegin
CREATE FUNCTION flexsite_notify_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('flexsite_outbox', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER outbox_notify AFTER INSERT ON outbox
    FOR EACH STATEMENT EXECUTE FUNCTION flexsite_notify_outbox();
CREATE TRIGGER notification_deliveries_notify AFTER INSERT ON notification_deliveries
    FOR EACH STATEMENT EXECUTE FUNCTION flexsite_notify_outbox();

-- +goose Down
DROP TRIGGER notification_deliveries_notify ON notification_deliveries;
DROP TRIGGER outbox_notify ON outbox;
DROP FUNCTION flexsite_notify_outbox();
DROP TABLE notification_reported;
DROP TABLE notification_subscriptions;
DROP TABLE notification_attempts;
DROP TABLE notification_deliveries;
DROP INDEX outbox_fanned_out;
DROP INDEX outbox_to_fan_out;
ALTER TABLE outbox ADD COLUMN delivered_at timestamptz;
UPDATE outbox SET delivered_at = fanned_out_at;
CREATE INDEX outbox_pending ON outbox (organisation, site_id, id) WHERE delivered_at IS NULL;
ALTER TABLE outbox DROP COLUMN fanned_out_at;
ALTER TABLE outbox DROP COLUMN subscription_uid;
ALTER TABLE outbox DROP CONSTRAINT outbox_event_unique;
ALTER TABLE outbox ADD CONSTRAINT outbox_event_id_key UNIQUE (event_id);
