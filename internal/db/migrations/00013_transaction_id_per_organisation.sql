-- A transaction id names one transaction within its organisation, no longer in the whole
-- database: with one index across organisations, an id another organisation had used answered
-- 409 (telling that it exists), and a client could take an id another organisation's
-- settlement would derive. Idempotency (the same id and record again) and conflicts (the same
-- id with another record, or at another site) are decided within the organisation.

-- +goose Up
CREATE UNIQUE INDEX reward_transactions_organisation_id ON reward_transactions (organisation, transaction_id);
DROP INDEX reward_transactions_id;

-- +goose Down
-- Fails while two organisations hold the same id: that history cannot go back to one index.
CREATE UNIQUE INDEX reward_transactions_id ON reward_transactions (transaction_id);
DROP INDEX reward_transactions_organisation_id;
