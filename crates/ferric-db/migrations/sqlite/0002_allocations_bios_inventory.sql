-- Allocations (API 1.52), node BIOS settings (1.40) and node inventories (1.81).

CREATE TABLE allocations (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    version         INTEGER NOT NULL,
    uuid            TEXT NOT NULL UNIQUE,
    name            TEXT UNIQUE,
    node_uuid       TEXT UNIQUE REFERENCES nodes (uuid) ON DELETE CASCADE,
    state           TEXT NOT NULL,
    last_error      TEXT,
    resource_class  TEXT,
    traits          TEXT NOT NULL DEFAULT '[]',
    candidate_nodes TEXT NOT NULL DEFAULT '[]',
    extra           TEXT NOT NULL DEFAULT '{}',
    owner           TEXT,
    created_at      TEXT NOT NULL,
    updated_at      TEXT
);

CREATE INDEX allocations_state_idx ON allocations (state);

CREATE TABLE node_bios_settings (
    node_uuid  TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      TEXT,
    registry   TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT,
    PRIMARY KEY (node_uuid, name)
);

CREATE TABLE node_inventories (
    node_uuid   TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    inventory   TEXT NOT NULL DEFAULT '{}',
    plugin_data TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    updated_at  TEXT
);
