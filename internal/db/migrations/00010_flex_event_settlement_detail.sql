-- A flex event's settlement in detail: the window each site was settled for (so that another
-- event's baseline passes over its days even after the FlexEvent is gone), the delivered
-- energy, the per-half-hour baseline and actual (what the household's rewards page draws,
-- stored rather than recomputed: later readings never change them), and each event's target
-- sites as first found after its start (so that a site enrolled at the start is settled even
-- when its enrolment ends before settlement).

-- +goose Up
ALTER TABLE flex_event_settlements
    ADD COLUMN start_at      timestamptz,
    ADD COLUMN end_at        timestamptz,
    ADD COLUMN rate_centipence bigint,
    ADD COLUMN delivered_mwh bigint,
    -- [{"start": RFC 3339, "baseline_mwh": n|null, "actual_mwh": n, "covered_s": n}, ...]
    ADD COLUMN half_hours    jsonb;

CREATE TABLE flex_event_targets (
    organisation text        NOT NULL,
    event_id     text        NOT NULL,
    site_id      text        NOT NULL,
    added_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, event_id, site_id)
);

-- +goose Down
DROP TABLE flex_event_targets;
ALTER TABLE flex_event_settlements
    DROP COLUMN half_hours,
    DROP COLUMN delivered_mwh,
    DROP COLUMN rate_centipence,
    DROP COLUMN end_at,
    DROP COLUMN start_at;
