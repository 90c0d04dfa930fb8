-- The hosted rewards page's private state, moved out of Secrets so that the manager needs no
-- access to every Secret of the cluster (docs/platform.md, RBAC):
--   rewards_links: one row per rewards link. The key is a prefix of the SHA-256 of the link's
--     one-time code; state holds the link and its session as the use case keeps them, with
--     only hashes of the code, the session secret and the emailed code (internal/app/rewards).
--     version makes every write conditional on the state read (two redemptions: one wins).
--     dead_after is when nobody can use the link any more: the leader's sweep deletes it then.
--   bank_details: a site's bank details, sealed with AES-256-GCM under a key of the bank
--     details key Secret (internal/pagestore.KeyRing); key_id names the key, so that keys can
--     rotate and old rows still open. The organisation and site are the AEAD's associated
--     data: a row copied to another site does not open.
--   pagestore_imports: the one-time moves of what older versions kept in Secrets (bank details
--     in flexsite-bank-<site id> Secrets of the organisations' namespaces), once done.

-- +goose Up
CREATE TABLE rewards_links (
    link_key   text PRIMARY KEY CHECK (link_key ~ '^[0-9a-f]{40}$'),
    state      jsonb NOT NULL,
    version    bigint NOT NULL DEFAULT 1,
    dead_after timestamptz NOT NULL
);
CREATE INDEX rewards_links_dead_after ON rewards_links (dead_after);

CREATE TABLE bank_details (
    organisation text NOT NULL,
    site_id      text NOT NULL,
    key_id       text NOT NULL CHECK (key_id <> ''),
    nonce        bytea NOT NULL,
    ciphertext   bytea NOT NULL,
    updated_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, site_id)
);
CREATE INDEX bank_details_key_id ON bank_details (key_id);

CREATE TABLE pagestore_imports (
    name    text PRIMARY KEY,
    done_at timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE pagestore_imports;
DROP TABLE bank_details;
DROP TABLE rewards_links;
