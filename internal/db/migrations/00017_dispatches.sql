-- Dispatch (docs/platform.md, "Dispatch: asking the devices"): a flex event asks each
-- dispatchable asset of its target sites to flex, once per (flex event, asset), and the asset
-- controller reports back.
--
-- dispatches holds one row per dispatch, keyed by its DispatchEvent event_id (a UUIDv5 of the
-- organisation, the flex event and the asset: internal/dispatch.EventID). It is inserted ON
-- CONFLICT DO NOTHING in the SQL transaction of its dispatch.requested outbox event, so
-- however many replicas, restarts or retries issue it, it is issued and notified once.
-- status is the current state (internal/dispatch.Status); every change of it is a row of
-- dispatch_status_changes (append-only: who and when), written in the transaction that
-- changes it, under the dispatch row's lock.
--
-- dispatch_skips holds the assets of target sites that were not asked, with the reason,
-- once per (flex event, asset), so the FlexEvent's status counts them from one place.

-- +goose Up
CREATE TABLE dispatches (
    organisation    text        NOT NULL,
    event_id        uuid        NOT NULL,
    flex_event      text        NOT NULL,
    site_id         text        NOT NULL,
    asset_id        text        NOT NULL,
    status          text        NOT NULL DEFAULT 'requested'
        CHECK (status IN ('requested', 'received', 'accepted', 'rejected', 'executed', 'failed', 'cancelled')),
    -- the DispatchEvent as delivered (prod's shape), kept as issued.
    market_id       text        NOT NULL,
    level_kw        double precision NOT NULL,
    from_time       timestamptz NOT NULL,
    to_time         timestamptz NOT NULL,
    event_timestamp timestamptz NOT NULL,
    issued_at       timestamptz NOT NULL DEFAULT now(),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, event_id),
    UNIQUE (organisation, flex_event, asset_id)
);
CREATE INDEX dispatches_site ON dispatches (organisation, site_id, flex_event);
CREATE INDEX dispatches_asset ON dispatches (organisation, asset_id, from_time);

CREATE TABLE dispatch_status_changes (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organisation text        NOT NULL,
    event_id     uuid        NOT NULL,
    status       text        NOT NULL,
    -- the report's own timestamp (EventResponse.timestamp); NULL for Flexsite's own changes
    -- (issued, cancelled).
    reported_at  timestamptz,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    -- who: the API client's username, or "flexsite" for the issuer and the cancellation.
    recorded_by  text        NOT NULL,
    FOREIGN KEY (organisation, event_id) REFERENCES dispatches (organisation, event_id) ON DELETE CASCADE
);
CREATE INDEX dispatch_status_changes_event ON dispatch_status_changes (organisation, event_id, id);

CREATE TABLE dispatch_skips (
    organisation text        NOT NULL,
    flex_event   text        NOT NULL,
    site_id      text        NOT NULL,
    asset_id     text        NOT NULL,
    reason       text        NOT NULL,
    recorded_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, flex_event, asset_id)
);

-- +goose Down
DROP TABLE dispatch_skips;
DROP TABLE dispatch_status_changes;
DROP TABLE dispatches;
