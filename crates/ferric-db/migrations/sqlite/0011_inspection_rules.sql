-- Inspection rules (API 1.96): conditions and actions are one JSON list each per rule (read
-- and written whole, never queried by item).

CREATE TABLE inspection_rules (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    version     INTEGER NOT NULL,
    uuid        TEXT NOT NULL UNIQUE,
    description TEXT,
    priority    INTEGER NOT NULL DEFAULT 0,
    sensitive   BOOLEAN NOT NULL DEFAULT 0,
    phase       TEXT NOT NULL DEFAULT 'main',
    conditions  TEXT NOT NULL DEFAULT '[]',
    actions     TEXT NOT NULL DEFAULT '[]',
    created_at  TEXT NOT NULL,
    updated_at  TEXT
);
