-- Deploy templates (API 1.55) and runbooks (API 1.92): named step lists. Steps are one JSON
-- list per record (read and written whole, never queried by step).

CREATE TABLE deploy_templates (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    version    INTEGER NOT NULL,
    uuid       TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL UNIQUE,
    steps      TEXT NOT NULL DEFAULT '[]',
    extra      TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT
);

CREATE TABLE runbooks (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    version         INTEGER NOT NULL,
    uuid            TEXT NOT NULL UNIQUE,
    name            TEXT NOT NULL UNIQUE,
    steps           TEXT NOT NULL DEFAULT '[]',
    public          BOOLEAN NOT NULL DEFAULT 0,
    owner           TEXT,
    disable_ramdisk BOOLEAN NOT NULL DEFAULT 0,
    extra           TEXT NOT NULL DEFAULT '{}',
    created_at      TEXT NOT NULL,
    updated_at      TEXT
);

CREATE INDEX runbooks_owner_idx ON runbooks (owner);
