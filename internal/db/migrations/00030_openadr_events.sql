-- The OpenADR door's events (docs/openadr.md): one OpenADR event per dispatch. An event's
-- programID is its flex event's proposition, kept on the dispatch when it is issued (NULL for
-- dispatches issued before: their market, which defaults to the proposition). The searches
-- answer the dispatches not cancelled (a cancelled event is deleted), latest window end first,
-- a page at a time: the partial indexes serve them in order with LIMIT, for the whole
-- organisation, for one program, and for each asset a VEN client's search names (a page's worth
-- read per asset, then merged).

-- +goose Up
ALTER TABLE dispatches ADD COLUMN proposition text;
CREATE INDEX dispatches_openadr ON dispatches (organisation, to_time DESC, event_id)
    WHERE status <> 'cancelled';
CREATE INDEX dispatches_openadr_program ON dispatches (organisation, (COALESCE(proposition, market_id)), to_time DESC, event_id)
    WHERE status <> 'cancelled';
CREATE INDEX dispatches_openadr_asset ON dispatches (organisation, asset_id, to_time DESC, event_id)
    WHERE status <> 'cancelled';

-- +goose Down
DROP INDEX dispatches_openadr_asset;
DROP INDEX dispatches_openadr_program;
DROP INDEX dispatches_openadr;
ALTER TABLE dispatches DROP COLUMN proposition;
