-- Volume connectors and targets (API 1.32): how a node reaches boot-from-volume storage.

CREATE TABLE volume_connectors (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    version      INTEGER NOT NULL,
    uuid         TEXT NOT NULL UNIQUE,
    node_uuid    TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    type         TEXT NOT NULL,
    connector_id TEXT NOT NULL,
    extra        TEXT NOT NULL DEFAULT '{}',
    created_at   TEXT NOT NULL,
    updated_at   TEXT,
    UNIQUE (type, connector_id)
);

CREATE INDEX volume_connectors_node_uuid_idx ON volume_connectors (node_uuid);

CREATE TABLE volume_targets (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    version     INTEGER NOT NULL,
    uuid        TEXT NOT NULL UNIQUE,
    node_uuid   TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    volume_type TEXT NOT NULL,
    properties  TEXT NOT NULL DEFAULT '{}',
    boot_index  INTEGER NOT NULL,
    volume_id   TEXT NOT NULL,
    extra       TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    updated_at  TEXT,
    UNIQUE (node_uuid, boot_index)
);

CREATE INDEX volume_targets_volume_id_idx ON volume_targets (volume_id);
