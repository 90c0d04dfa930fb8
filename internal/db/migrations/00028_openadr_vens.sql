-- The OpenADR door's VENs and the resources each holds (docs/openadr.md). A VEN is registered
-- by an API client of the organisation (client_name: the client that speaks for it, whose
-- token then sees only what targets it); venName is unique in the organisation. A resource is
-- one of the organisation's assets (resource_name: its asset_id), held by at most one VEN of
-- the organisation at a time: the unique (organisation, resource_name) is that rule, so two
-- VENs racing for one asset cannot both hold it. Deleting a VEN releases its resources.

-- +goose Up
CREATE TABLE openadr_vens (
    organisation text        NOT NULL,
    id           uuid        NOT NULL,
    client_name  text        NOT NULL,
    ven_name     text        NOT NULL CHECK (length(ven_name) BETWEEN 1 AND 128),
    attributes   jsonb,
    targets      jsonb,
    created_at   timestamptz NOT NULL DEFAULT now(),
    modified_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, id),
    CONSTRAINT openadr_vens_name UNIQUE (organisation, ven_name)
);
CREATE INDEX openadr_vens_client ON openadr_vens (organisation, client_name);

CREATE TABLE openadr_resources (
    organisation  text        NOT NULL,
    id            uuid        NOT NULL,
    ven_id        uuid        NOT NULL,
    resource_name text        NOT NULL CHECK (length(resource_name) BETWEEN 1 AND 128),
    attributes    jsonb,
    targets       jsonb,
    created_at    timestamptz NOT NULL DEFAULT now(),
    modified_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (organisation, id),
    CONSTRAINT openadr_resources_held_once UNIQUE (organisation, resource_name),
    FOREIGN KEY (organisation, ven_id) REFERENCES openadr_vens (organisation, id) ON DELETE CASCADE
);
CREATE INDEX openadr_resources_ven ON openadr_resources (organisation, ven_id);

-- +goose Down
DROP TABLE openadr_resources;
DROP TABLE openadr_vens;
