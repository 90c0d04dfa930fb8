-- Each asset's latest EV schedule answer, per site (schedulestore.LatestOfSite: what the
-- household's pages and the OCPP profile show). Read as DISTINCT ON (asset_id) ... ORDER BY
-- asset_id, id DESC over ev_schedules, the answer sorted every answer the site ever had: no
-- index is in that order, so each read grew with the site's history.
--
-- ev_schedules_latest holds one row per (organisation, site, asset): the id of its latest
-- answer, upserted in the statement that appends the answer (the larger id stands, as the
-- read ordered by id). A site's latest answers are its rows here, in primary-key order, each
-- joined to its answer by id: the read costs the site's assets, never its history. An answer
-- deleted (the retention sweep: schedulestore.DeleteExpired) takes its row here with it; an
-- older answer of the asset is then never shown again (a superseded answer stays superseded).
--
-- The per-site and per-asset indexes of 00020 served only that read: dropped.

-- +goose Up
CREATE TABLE ev_schedules_latest (
    organisation text   NOT NULL,
    site_id      text   NOT NULL,
    asset_id     text   NOT NULL,
    id           bigint NOT NULL UNIQUE REFERENCES ev_schedules (id) ON DELETE CASCADE,
    PRIMARY KEY (organisation, site_id, asset_id)
);
INSERT INTO ev_schedules_latest (organisation, site_id, asset_id, id)
    SELECT DISTINCT ON (organisation, site_id, asset_id) organisation, site_id, asset_id, id
    FROM ev_schedules ORDER BY organisation, site_id, asset_id, id DESC;
DROP INDEX ev_schedules_site;
DROP INDEX ev_schedules_asset;

-- +goose Down
CREATE INDEX ev_schedules_asset ON ev_schedules (organisation, asset_id, id DESC);
CREATE INDEX ev_schedules_site ON ev_schedules (organisation, site_id, id DESC);
DROP TABLE ev_schedules_latest;
