-- A site's history revision: how many changes its reward history has had (transactions
-- appended, withdrawal status changes recorded). Both tables are append-only, so it only
-- grows. The RewardLedger's summary records the revision it was computed from; a reader that
-- wrote revision r (GET /rewards/{site_id}/info after a POST) knows the summary shows its
-- write once the summary's revision is at least r. Counted by triggers, so that every writer
-- (the API, withdrawals, settlement's batch statement, imports) counts alike, and under the
-- site row's lock, so that revisions follow the order of commits.

-- +goose Up
ALTER TABLE reward_sites ADD COLUMN revision bigint NOT NULL DEFAULT 0;

UPDATE reward_sites r SET revision =
    (SELECT count(*) FROM reward_transactions t WHERE t.organisation = r.organisation AND t.site_id = r.site_id) +
    (SELECT count(*) FROM withdrawal_status_changes c WHERE c.organisation = r.organisation AND c.site_id = r.site_id);

-- One UPDATE per site per statement (settlement credits thousands of sites in one), not per row.
-- +goose StatementBegin
CREATE FUNCTION flexsite_count_revisions() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Sites locked in one order: two statements crediting overlapping sites never deadlock.
    PERFORM 1 FROM reward_sites r JOIN (SELECT DISTINCT organisation, site_id FROM new_rows) n
        ON r.organisation = n.organisation AND r.site_id = n.site_id
        ORDER BY r.organisation, r.site_id FOR NO KEY UPDATE OF r;
    UPDATE reward_sites r SET revision = r.revision + n.changes
    FROM (SELECT organisation, site_id, count(*) AS changes FROM new_rows GROUP BY organisation, site_id) n
    WHERE r.organisation = n.organisation AND r.site_id = n.site_id;
    RETURN NULL;
END;
$$;
-- +goose StatementEnd
CREATE TRIGGER reward_transactions_revision AFTER INSERT ON reward_transactions
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION flexsite_count_revisions();
CREATE TRIGGER withdrawal_status_changes_revision AFTER INSERT ON withdrawal_status_changes
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION flexsite_count_revisions();

-- +goose Down
DROP TRIGGER withdrawal_status_changes_revision ON withdrawal_status_changes;
DROP TRIGGER reward_transactions_revision ON reward_transactions;
DROP FUNCTION flexsite_count_revisions();
ALTER TABLE reward_sites DROP COLUMN revision;
