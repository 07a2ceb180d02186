-- Inspection rules (API 1.96): conditions and actions are one JSON list each per rule (read
-- and written whole, never queried by item).

CREATE TABLE inspection_rules (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version     BIGINT NOT NULL,
    uuid        UUID NOT NULL UNIQUE,
    description TEXT,
    priority    BIGINT NOT NULL DEFAULT 0,
    sensitive   BOOLEAN NOT NULL DEFAULT FALSE,
    phase       TEXT NOT NULL DEFAULT 'main',
    conditions  JSONB NOT NULL DEFAULT '[]',
    actions     JSONB NOT NULL DEFAULT '[]',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ
);
