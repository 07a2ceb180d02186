-- The inspection service's state (issue 21), which it kept in memory before: its node cache
-- (one introspection per node, with the MACs and BMC addresses the ramdisk's data is matched
-- against, which also drive the PXE filter), the data it stored, and its rules.

CREATE TABLE introspections (
    node_uuid     TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    state         TEXT NOT NULL,
    manage_boot   BOOLEAN NOT NULL DEFAULT 1,
    macs          TEXT NOT NULL DEFAULT '[]',
    bmc_addresses TEXT NOT NULL DEFAULT '[]',
    error         TEXT,
    started_at    TEXT NOT NULL,
    finished_at   TEXT
);

CREATE INDEX introspections_started_at_idx ON introspections (started_at);

CREATE TABLE introspection_data (
    node_uuid  TEXT PRIMARY KEY REFERENCES introspections (node_uuid) ON DELETE CASCADE,
    data       TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL
);

CREATE TABLE introspection_rules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid        TEXT NOT NULL UNIQUE,
    description TEXT,
    scope       TEXT,
    conditions  TEXT NOT NULL DEFAULT '[]',
    actions     TEXT NOT NULL DEFAULT '[]',
    created_at  TEXT NOT NULL
);
