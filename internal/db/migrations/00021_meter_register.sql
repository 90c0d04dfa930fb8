-- The meter-point register (docs/platform.md, "The meter register"): platform-wide (no
-- organisation column), loaded by the platform team with `flexsite-admin meters import` from its
-- licensed export. A row sent again replaces the earlier one (its MPAN is its key).
-- postcode is normalised ("SW1A 1AA"). sort_key, the natural order of the one-line address
-- (meters.SortKey of meters.Point.Address), is derived from the row by internal/meters when it
-- is loaded, never in SQL, and kept because the lookups order by it (collation "C": byte
-- order); the one-line address itself is derived again wherever it is shown, not stored.
-- The postcode index holds the postcode alone: a postcode's few dozen rows are sorted by
-- sort_key in a moment, and an index of repeated keys is deduplicated to about 8 bytes a meter
-- point, where (postcode, sort_key), unique, took 111 (3 GiB at Great Britain's 30 million).
-- pg_trgm (PostgreSQL's contrib, trusted since 13: a database owner may create it) gives
-- similarity(), which ranks a postcode's addresses against the one a caller gave.

-- +goose Up
CREATE EXTENSION IF NOT EXISTS pg_trgm;
CREATE TABLE meter_points (
    mpan                text        PRIMARY KEY,
    address_line_1      text        NOT NULL,
    address_line_2      text        NOT NULL,
    address_line_3      text        NOT NULL,
    address_line_4      text        NOT NULL,
    town                text        NOT NULL,
    postcode            text        NOT NULL,
    supplier_mpid       text        NOT NULL,
    supplier_name       text        NOT NULL,
    half_hourly_settled boolean     NOT NULL,
    sort_key            text        COLLATE "C" NOT NULL,
    loaded_at           timestamptz NOT NULL
);
CREATE INDEX meter_points_postcode ON meter_points (postcode);

-- +goose Down
DROP TABLE meter_points;
