-- The bound of the reports an API client keeps of an event (docs/openadr.md, "Limits"), as one
-- function a statement calls in its condition: it takes the lock of the client's reports of
-- the event (held until the transaction ends), then counts them. A VOLATILE function's
-- statements each take a snapshot of their own, so the count sees every report committed
-- before the lock was granted: a statement that counts and inserts in one is race-free, with
-- no lock statement of its own before it (a report and the status change it says are one
-- statement, one round trip).

-- +goose Up
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

-- +goose Down
DROP FUNCTION openadr_report_room(text, text, text, integer);
