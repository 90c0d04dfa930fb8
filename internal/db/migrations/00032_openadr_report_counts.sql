-- The bound of the reports an API client keeps of an event (docs/openadr.md, "Limits") as a
-- count kept beside the reports, one row per organisation, event and client, written in the
-- statement that stores or deletes a report. Storing one adds one to the row (inserted at 1
-- the first time) and sets bound to the bound the statement is held to; the check refuses
-- the count past it, which aborts the whole statement: nothing it wrote stays, the status
-- change a report says included. The row's lock (taken by the insert or the update) orders
-- the reports racing into one client's last places of an event: each adds to the count the
-- one before it committed, so no more than the bound are ever kept. This replaces counting the
-- client's reports under an advisory lock in a function (migration 00031), which cost the
-- report a function call, a lock and a count on every report.

-- +goose Up
CREATE TABLE openadr_report_counts (
    organisation text    NOT NULL,
    event_id     text    NOT NULL,
    client_name  text    NOT NULL,
    reports      integer NOT NULL,
    bound        integer NOT NULL,
    CONSTRAINT openadr_report_counts_bound CHECK (reports <= bound),
    PRIMARY KEY (organisation, event_id, client_name)
);
INSERT INTO openadr_report_counts (organisation, event_id, client_name, reports, bound)
SELECT organisation, event_id, client_name, count(*), count(*) FROM openadr_reports
GROUP BY organisation, event_id, client_name;
DROP FUNCTION openadr_report_room(text, text, text, integer);

-- +goose Down
-- +goose StatementBegin
CREATE FUNCTION openadr_report_room(p_organisation text, p_client text, p_event text, p_bound integer)
    RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('openadr_reports/' || p_organisation || '/' || p_client || '/' || p_event, 52));
    RETURN (SELECT count(*) FROM (SELECT 1 FROM openadr_reports r
        WHERE r.organisation = p_organisation AND r.event_id = p_event AND r.client_name = p_client LIMIT p_bound) x) < p_bound;
END;
$$;
-- +goose StatementEnd
DROP TABLE openadr_report_counts;
