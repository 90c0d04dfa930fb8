-- What the devices tell Flexsite (docs/api.md, "Asset events: what the devices tell Flexsite"):
-- prod's asset events, appended once and never changed. Each row is one event as received: its type,
-- when, who sent it (the API client), and the parts of the request it carried (intent,
-- vehicle, tariff, a charge-now's end). An asset's latest plug, intent, tariff and charge-now
-- state is read in one query (internal/asseteventstore.Latest), each part from its own
-- partial index, newest first.

-- +goose Up
CREATE TABLE asset_events (
    id           bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    organisation text        NOT NULL,
    asset_id     text        NOT NULL,
    event_type   text        NOT NULL CHECK (event_type IN
        ('plug_in', 'plug_out', 'intent_update', 'charge_now', 'charge_now_deleted', 'tariff_update')),
    received_at  timestamptz NOT NULL DEFAULT now(),
    recorded_by  text        NOT NULL,
    intent       jsonb,
    vehicle      jsonb,
    tariff       jsonb,
    end_at       timestamptz
);
CREATE INDEX asset_events_plug ON asset_events (organisation, asset_id, id DESC)
    WHERE event_type IN ('plug_in', 'plug_out');
CREATE INDEX asset_events_charge_now ON asset_events (organisation, asset_id, id DESC)
    WHERE event_type IN ('charge_now', 'charge_now_deleted');
CREATE INDEX asset_events_intent ON asset_events (organisation, asset_id, id DESC) WHERE intent IS NOT NULL;
CREATE INDEX asset_events_tariff ON asset_events (organisation, asset_id, id DESC) WHERE tariff IS NOT NULL;

-- +goose Down
DROP TABLE asset_events;
