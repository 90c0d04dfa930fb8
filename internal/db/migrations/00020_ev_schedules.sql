-- EV schedules (docs/api.md, "The EV schedule"): every answer of
-- POST /entities/asset/{asset_id}/event/plug-in-schedule, appended once and never changed,
-- with the schedule the device sent. The household's pages show the latest answer's next
-- charging window ("Your car will charge 01:00–04:30, when energy is cheapest").
-- blocks and requested are JSON arrays of {"start","end"} (RFC 3339, UTC); changed is false
-- when the answer is the request unchanged (too few priced half-hours in the window).

-- +goose Up
CREATE TABLE ev_schedules (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organisation text        NOT NULL,
    site_id      text        NOT NULL,
    asset_id     text        NOT NULL,
    requested    jsonb       NOT NULL,
    blocks       jsonb       NOT NULL,
    changed      boolean     NOT NULL,
    window_end   timestamptz NOT NULL,
    answered_at  timestamptz NOT NULL,
    answered_by  text        NOT NULL
);
CREATE INDEX ev_schedules_site ON ev_schedules (organisation, site_id, id DESC);
CREATE INDEX ev_schedules_asset ON ev_schedules (organisation, asset_id, id DESC);

-- +goose Down
DROP TABLE ev_schedules;
