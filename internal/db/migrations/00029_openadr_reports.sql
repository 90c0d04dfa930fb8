-- The OpenADR door's reports (docs/openadr.md): what a VEN reported of an event (a dispatch),
-- kept as the door answers it back. client_name is the API client that sent it (its owner: a
-- VEN client sees its own reports); report_client_name is the report's own clientName. The
-- dispatch's status and the readings a report gave are the dispatches' and the readings'
-- tables': deleting a report removes this row only.

-- +goose Up
CREATE TABLE openadr_reports (
    organisation       text        NOT NULL,
    id                 uuid        NOT NULL,
    client_name        text        NOT NULL,
    program_id         text        NOT NULL CHECK (length(program_id) BETWEEN 1 AND 128),
    event_id           text        NOT NULL CHECK (length(event_id) BETWEEN 1 AND 128),
    report_client_name text        NOT NULL CHECK (length(report_client_name) BETWEEN 1 AND 128),
    report_name        text,
    -- the report's payloadDescriptors and resources, as the door answers them.
    body               jsonb       NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    modified_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, id)
);
CREATE INDEX openadr_reports_sender ON openadr_reports (organisation, client_name, created_at, id);
CREATE INDEX openadr_reports_event ON openadr_reports (organisation, event_id, created_at, id);

-- +goose Down
DROP TABLE openadr_reports;
