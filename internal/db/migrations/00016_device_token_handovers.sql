-- Tokens a device provider answered to a refresh, handed over until the connection's Secret
-- holds them. With refresh-token rotation the provider's answer is the only copy of a working
-- grant: when the API server fails the Secret write and the manager dies before a retry
-- succeeds, the next refresh finds them here. Sealed (AES-256-GCM) with a key that exists
-- only in the connection's Secret, written with the refresh claim before the provider is
-- called, so that this table holds nothing readable without that Secret. One row per
-- connection (its uid), replaced by each refresh, deleted once the Secret holds the tokens.

-- +goose Up
CREATE TABLE device_token_handovers (
    connection_uid text        PRIMARY KEY,
    sealed         bytea       NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE device_token_handovers;
