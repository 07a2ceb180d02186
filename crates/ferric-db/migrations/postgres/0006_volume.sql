-- Volume connectors and targets (API 1.32): how a node reaches boot-from-volume storage.

CREATE TABLE volume_connectors (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version      BIGINT NOT NULL,
    uuid         UUID NOT NULL UNIQUE,
    node_uuid    UUID NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    type         TEXT NOT NULL,
    connector_id TEXT NOT NULL,
    extra        JSONB NOT NULL DEFAULT '{}',
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ,
    UNIQUE (type, connector_id)
);

CREATE INDEX volume_connectors_node_uuid_idx ON volume_connectors (node_uuid);

CREATE TABLE volume_targets (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version     BIGINT NOT NULL,
    uuid        UUID NOT NULL UNIQUE,
    node_uuid   UUID NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    volume_type TEXT NOT NULL,
    properties  JSONB NOT NULL DEFAULT '{}',
    boot_index  BIGINT NOT NULL,
    volume_id   TEXT NOT NULL,
    extra       JSONB NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ,
    UNIQUE (node_uuid, boot_index)
);

CREATE INDEX volume_targets_volume_id_idx ON volume_targets (volume_id);
