-- What issuing a dispatch writes (docs/platform.md, "Dispatch: what the database holds"):
-- every index of dispatches and every check on its status history is paid at every dispatch of
-- a burst, inside the transactions whose length holds back every organisation's notifications
-- (the delivery horizon, docs/notifications.md). Two of them did no work of their own:
--   - dispatches_asset (organisation, asset_id, from_time) is covered by
--     dispatches_openadr_asset (organisation, asset_id, to_time DESC, event_id, the dispatches
--     not cancelled): the battery schedule's read of an asset's standing windows
--     (dispatchstore.WindowsOfAsset: not cancelled, ending after the schedule's start) is served
--     by it, and reads only the windows that end after that start instead of every window the
--     asset had since its first;
--   - the foreign key of dispatch_status_changes to dispatches: every status change is written
--     by a statement that takes its dispatch from the row it has just inserted or updated in the
--     same transaction (issue, cancel, a report), and no dispatch is ever deleted, so the key
--     checked nothing; its ON DELETE CASCADE had nothing to cascade.

-- +goose Up
DROP INDEX dispatches_asset;
ALTER TABLE dispatch_status_changes DROP CONSTRAINT dispatch_status_changes_organisation_event_id_fkey;

-- +goose Down
ALTER TABLE dispatch_status_changes ADD FOREIGN KEY (organisation, event_id)
    REFERENCES dispatches (organisation, event_id) ON DELETE CASCADE;
CREATE INDEX dispatches_asset ON dispatches (organisation, asset_id, from_time);
