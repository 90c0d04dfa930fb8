-- The first schema: reward transactions and withdrawal status changes (the ledger), readings,
-- each site's settlement of each flex event, and the notification outbox.
--
-- Every table's key starts with (organisation, site_id) or (organisation, asset_id), and every
-- query names them (and a time range): the tables can be distributed by site later (e.g. Citus
-- with site_id as the distribution column) without a query changing. organisation is the
-- organisation's namespace; site_id is the Site's API id (its name in that namespace).

-- +goose Up

-- One row per site with rewards: what a withdrawal locks (SELECT ... FOR UPDATE) so that two
-- withdrawals of one site are serialised and the balance never goes below zero.
CREATE TABLE reward_sites (
    organisation text        NOT NULL,
    site_id      text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, site_id)
);

-- Every credit and debit, append-only: a correction is a new transaction.
CREATE TABLE reward_transactions (
    organisation     text        NOT NULL,
    site_id          text        NOT NULL,
    transaction_id   uuid        NOT NULL,
    transaction_type text        NOT NULL CHECK (transaction_type IN ('flex period', 'flex period top-up',
                         'flex event', 'withdrawal', 'invoice paid', 'goodwill credit', 'signup bonus', 'correction')),
    credit_pence     bigint      NOT NULL,
    flex_wh          bigint,
    start_at         timestamptz,
    end_at           timestamptz,
    settlement_date  date,
    -- when it happened, for the statement order: start_at, else the settlement date (UTC).
    occurred_at      timestamptz,
    -- a withdrawal's first payment status; its changes are withdrawal_status_changes.
    initial_payment_status text CHECK (initial_payment_status IN ('pending_approval', 'approved', 'processing',
                         'posted', 'failed', 'rejected', 'cancelled', 'returned')),
    -- who put it here: the REST API, a RewardLedger's spec (or its import), a flex event's
    -- settlement, or a household's withdrawal on the hosted rewards page.
    source           text        NOT NULL CHECK (source IN ('api', 'ledger-spec', 'settlement', 'hosted-withdrawal')),
    -- SHA-256 of the record as first written: the same id again with the same record is the
    -- same request (idempotent), with another record a conflict.
    request_digest   bytea       NOT NULL,
    created_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, site_id, transaction_id),
    FOREIGN KEY (organisation, site_id) REFERENCES reward_sites (organisation, site_id),
    CHECK (transaction_type <> 'withdrawal' OR credit_pence <= 0),
    CHECK (initial_payment_status IS NULL OR transaction_type = 'withdrawal'),
    CHECK (end_at IS NULL OR start_at IS NULL OR end_at >= start_at)
);
-- A transaction id names one transaction in the whole database (they are UUIDs).
CREATE UNIQUE INDEX reward_transactions_id ON reward_transactions (transaction_id);
CREATE INDEX reward_transactions_statement ON reward_transactions
    (organisation, site_id, occurred_at DESC NULLS LAST, transaction_id);

-- Every change of a withdrawal's payment status, with who and when; append-only. A
-- withdrawal's status is its initial one, or the latest change's.
CREATE TABLE withdrawal_status_changes (
    organisation   text        NOT NULL,
    site_id        text        NOT NULL,
    transaction_id uuid        NOT NULL,
    seq            bigint      GENERATED ALWAYS AS IDENTITY,
    from_status    text        NOT NULL,
    to_status      text        NOT NULL CHECK (to_status IN ('pending_approval', 'approved', 'processing',
                       'posted', 'failed', 'rejected', 'cancelled', 'returned')),
    actor          text        NOT NULL,
    changed_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, site_id, transaction_id, seq),
    FOREIGN KEY (organisation, site_id, transaction_id)
        REFERENCES reward_transactions (organisation, site_id, transaction_id)
);

-- Append-only: history is never rewritten. (Privileges are the operator's; the trigger holds
-- whatever role the manager connects as, the table's owner included.)
-- +goose StatementBegin
CREATE FUNCTION flexsite_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'integrity_constraint_violation';
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER reward_transactions_append_only BEFORE UPDATE OR DELETE ON reward_transactions
    FOR EACH ROW EXECUTE FUNCTION flexsite_append_only();
CREATE TRIGGER reward_transactions_no_truncate BEFORE TRUNCATE ON reward_transactions
    FOR EACH STATEMENT EXECUTE FUNCTION flexsite_append_only();
CREATE TRIGGER withdrawal_status_changes_append_only BEFORE UPDATE OR DELETE ON withdrawal_status_changes
    FOR EACH ROW EXECUTE FUNCTION flexsite_append_only();
CREATE TRIGGER withdrawal_status_changes_no_truncate BEFORE TRUNCATE ON withdrawal_status_changes
    FOR EACH STATEMENT EXECUTE FUNCTION flexsite_append_only();

-- Readings as sent to POST /data/readings, partitioned by month of their start (UTC). A
-- reading sent again (same asset, label, start, end) replaces the earlier value (an upsert on
-- the primary key). Partitions are made ahead by db.EnsureReadingPartitions (on start and
-- before a write outside them); the default partition catches anything else.
CREATE TABLE readings (
    organisation text             NOT NULL,
    site_id      text             NOT NULL,
    asset_id     text             NOT NULL,
    label        text             NOT NULL,
    start_at     timestamptz      NOT NULL,
    end_at       timestamptz      NOT NULL,
    value        double precision NOT NULL CHECK (value <> 'NaN' AND value < 'Infinity' AND value > '-Infinity'),
    received_at  timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, site_id, asset_id, label, start_at, end_at),
    CHECK (end_at >= start_at)
) PARTITION BY RANGE (start_at);
CREATE TABLE readings_default PARTITION OF readings DEFAULT;

-- Each site's settlement of each flex event, exactly once (the primary key): settled with its
-- credit, or skipped with a reason.
CREATE TABLE flex_event_settlements (
    organisation   text        NOT NULL,
    event_id       text        NOT NULL,
    site_id        text        NOT NULL,
    status         text        NOT NULL CHECK (status IN ('settled', 'skipped')),
    reason         text,
    flex_wh        bigint,
    credit_pence   bigint,
    transaction_id uuid,
    settled_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, event_id, site_id),
    CHECK ((status = 'skipped') = (reason IS NOT NULL))
);
CREATE INDEX flex_event_settlements_site ON flex_event_settlements (organisation, site_id, event_id);

-- The notification outbox: an event written in the same SQL transaction as what it reports,
-- delivered (in id order per site) by internal/delivery, then marked delivered.
CREATE TABLE outbox (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organisation text        NOT NULL,
    site_id      text        NOT NULL,
    event_type   text        NOT NULL,
    event_id     text        NOT NULL UNIQUE,
    payload      jsonb       NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    delivered_at timestamptz
);
CREATE INDEX outbox_pending ON outbox (organisation, site_id, id) WHERE delivered_at IS NULL;

-- +goose Down
DROP TABLE outbox;
DROP TABLE flex_event_settlements;
DROP TABLE readings;
DROP TABLE withdrawal_status_changes;
DROP TABLE reward_transactions;
DROP TABLE reward_sites;
DROP FUNCTION flexsite_append_only();
