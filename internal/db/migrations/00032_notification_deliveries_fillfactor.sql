-- Claims as HOT updates (docs/notifications.md, "How it works"): a claim sets only
-- claimed_until, which no index holds, so PostgreSQL can write the claimed row's new version
-- beside the old one in its page (a heap-only tuple) and touch none of the table's five
-- indexes, if the page has room. Rows are inserted in bursts that fill their pages, so without
-- room every claimed row's new version went to another page with an entry in each index: most
-- of a burst's claim cost. Half of each new page is left for it. Pages written before keep
-- theirs; the table's rows are deleted within days of delivery, so new pages soon hold them all.

-- +goose Up
ALTER TABLE notification_deliveries SET (fillfactor = 50);

-- +goose Down
ALTER TABLE notification_deliveries RESET (fillfactor);
