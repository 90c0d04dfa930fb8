-- A reward transaction's credit is bounded (household.MaxTransactionPence, £10 bn either
-- way), so that no site's sums can pass a bigint: two credits near its maximum once made a
-- site's balance unreadable (sum(credit_pence)::bigint overflowed) and, the history being
-- append-only, for good. NOT VALID: the rows already stored are not scanned (the table is
-- append-only and a migration must not fail on a history it cannot change); every row
-- written from now on is checked.

-- +goose Up
ALTER TABLE reward_transactions ADD CONSTRAINT reward_transactions_credit_bounded
    CHECK (credit_pence BETWEEN -1000000000000 AND 1000000000000) NOT VALID;

-- +goose Down
ALTER TABLE reward_transactions DROP CONSTRAINT reward_transactions_credit_bounded;
