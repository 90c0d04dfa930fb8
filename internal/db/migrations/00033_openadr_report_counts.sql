-- The bound of the reports an API client keeps of an event (docs/openadr.md, "Limits") counted
-- on the event's dispatch row: report_counts holds, per API client (its name the key), how many
-- reports it keeps of the dispatch. A report is checked against it and counted in the UPDATE of
-- that row the report's statement makes (the status it says, or the count alone), under the
-- row's lock, so the check is race-free with no lock of its own; the count follows the dispatch,
-- not how the report spelt its eventID. The reports the previous version's function
-- (openadr_report_room, migration 00031) counted one by one under an advisory lock are counted
-- into it here.
--
-- A rolling update runs replicas of the previous version beside these ones: they still call
-- openadr_report_room and insert reports without counted. So that the bound stays exact while
-- they do, openadr_report_room now checks the same count under the same row lock, and a report
-- inserted without counted is counted by a trigger in its own transaction; a deleted report,
-- or one moved to another event, is uncounted (and counted again) by a trigger, whichever
-- version deletes or moves it (the previous version does not check a move against the bound:
-- such a move is counted, and only delays the next report there). Once no replica of the
-- previous version runs, a later migration may drop openadr_report_room, the insert trigger
-- and counted.

-- +goose Up
ALTER TABLE dispatches ADD COLUMN report_counts jsonb;
-- true: counted by the statement that inserted it (this version's); false: by the trigger.
ALTER TABLE openadr_reports ADD COLUMN counted boolean NOT NULL DEFAULT false;

-- The dispatch's event id of a report's eventID as it was spelt (any spelling Go's uuid.Parse
-- takes, which the door judged it by); NULL for any other text.
-- +goose StatementBegin
CREATE FUNCTION openadr_event_uuid(p text) RETURNS uuid LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN x ~ '^[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}$'
        THEN x::uuid END
    FROM (SELECT CASE length(p) WHEN 45 THEN substr(p, 10) WHEN 38 THEN substr(p, 2, 36) ELSE p END AS x) s
$$;
-- +goose StatementEnd

UPDATE dispatches d SET report_counts = c.counts
FROM (SELECT organisation, event, jsonb_object_agg(client_name, n) AS counts
    FROM (SELECT organisation, openadr_event_uuid(event_id) AS event, client_name, count(*) AS n
        FROM openadr_reports GROUP BY 1, 2, 3) r
    WHERE event IS NOT NULL GROUP BY 1, 2) c
WHERE d.organisation = c.organisation AND d.event_id = c.event;

-- The previous version's condition: the count under the dispatch row's lock (held until the
-- transaction ends); no dispatch, no room.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION openadr_report_room(p_organisation text, p_client text, p_event text, p_bound integer)
    RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    n integer;
BEGIN
    SELECT COALESCE((report_counts ->> p_client)::integer, 0) INTO n FROM dispatches
        WHERE organisation = p_organisation AND event_id = openadr_event_uuid(p_event) FOR UPDATE;
    RETURN FOUND AND n < p_bound;
END;
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION openadr_reports_count() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP IN ('UPDATE', 'DELETE') THEN
        UPDATE dispatches SET report_counts = report_counts || jsonb_build_object(OLD.client_name,
                GREATEST(COALESCE((report_counts ->> OLD.client_name)::integer, 0) - 1, 0))
            WHERE organisation = OLD.organisation AND event_id = openadr_event_uuid(OLD.event_id)
                AND report_counts ? OLD.client_name;
    END IF;
    IF TG_OP IN ('UPDATE', 'INSERT') THEN
        UPDATE dispatches SET report_counts = COALESCE(report_counts, '{}') || jsonb_build_object(NEW.client_name,
                COALESCE((report_counts ->> NEW.client_name)::integer, 0) + 1)
            WHERE organisation = NEW.organisation AND event_id = openadr_event_uuid(NEW.event_id);
    END IF;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd

CREATE TRIGGER openadr_reports_uncounted AFTER INSERT ON openadr_reports
    FOR EACH ROW WHEN (NOT NEW.counted) EXECUTE FUNCTION openadr_reports_count();
CREATE TRIGGER openadr_reports_deleted AFTER DELETE ON openadr_reports
    FOR EACH ROW EXECUTE FUNCTION openadr_reports_count();
CREATE TRIGGER openadr_reports_moved AFTER UPDATE OF organisation, client_name, event_id ON openadr_reports
    FOR EACH ROW WHEN (OLD.organisation IS DISTINCT FROM NEW.organisation OR OLD.client_name IS DISTINCT FROM NEW.client_name
        OR OLD.event_id IS DISTINCT FROM NEW.event_id)
    EXECUTE FUNCTION openadr_reports_count();

-- +goose Down
DROP TRIGGER openadr_reports_moved ON openadr_reports;
DROP TRIGGER openadr_reports_deleted ON openadr_reports;
DROP TRIGGER openadr_reports_uncounted ON openadr_reports;
DROP FUNCTION openadr_reports_count();
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION openadr_report_room(p_organisation text, p_client text, p_event text, p_bound integer)
    RETURNS boolean LANGUAGE plpgsql VOLATILE AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended('openadr_reports/' || p_organisation || '/' || p_client || '/' || p_event, 52));
    RETURN (SELECT count(*) FROM (SELECT 1 FROM openadr_reports r
        WHERE r.organisation = p_organisation AND r.event_id = p_event AND r.client_name = p_client LIMIT p_bound) x) < p_bound;
END;
$$;
-- +goose StatementEnd
DROP FUNCTION openadr_event_uuid(text);
ALTER TABLE openadr_reports DROP COLUMN counted;
ALTER TABLE dispatches DROP COLUMN report_counts;
