-- Prices (docs/api.md, "Prices"): an organisation declares half-hourly prices per market
-- and UK local day. A day is declared whole (46, 48 or 50 settlement periods,
-- internal/prices.CheckDay) and replaced whole: its rows are deleted and written in one SQL
-- transaction, so a reader sees the old day or the new one, never a mix. price_centi is the
-- price in hundredths of £/MWh (two decimals, exact). updated_at is when the day was last
-- declared: a battery schedule's schedule_last_updated reads it.

-- +goose Up
CREATE TABLE market_prices (
    organisation text        NOT NULL,
    market       text        NOT NULL,
    day          date        NOT NULL,
    start_at     timestamptz NOT NULL,
    price_centi  bigint      NOT NULL CHECK (price_centi BETWEEN -100000000 AND 100000000),
    updated_at   timestamptz NOT NULL,
    updated_by   text        NOT NULL,
    PRIMARY KEY (organisation, market, start_at)
);
CREATE INDEX market_prices_day ON market_prices (organisation, market, day);

-- +goose Down
DROP TABLE market_prices;
