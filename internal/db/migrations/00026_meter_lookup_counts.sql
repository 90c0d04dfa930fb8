-- The meter register's lookup budget (docs/api.md, "Meters"; internal/meters' Budgets): how
-- many lookups an organisation (household '') or one of its households (its site) made in a
-- window of span_seconds from window_start (a UTC hour or day). One row a window: a lookup
-- counts with one INSERT ... ON CONFLICT DO UPDATE (meterstore.LookupCounts.Count), in every
-- replica alike. Ended windows are deleted when one of the organisation's windows begins, so
-- the table holds about one row per organisation and household active in the last day.

-- +goose Up
CREATE TABLE meter_lookup_counts (
    organisation text        NOT NULL,
    household    text        NOT NULL,
    span_seconds integer     NOT NULL CHECK (span_seconds > 0),
    window_start timestamptz NOT NULL,
    n            bigint      NOT NULL CHECK (n > 0),
    PRIMARY KEY (organisation, household, span_seconds, window_start)
);

-- +goose Down
DROP TABLE meter_lookup_counts;
