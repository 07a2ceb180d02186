-- Deploy templates (API 1.55) and runbooks (API 1.92): named step lists. Steps are one JSON
-- list per record (read and written whole, never queried by step).

CREATE TABLE deploy_templates (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version    BIGINT NOT NULL,
    uuid       UUID NOT NULL UNIQUE,
    name       TEXT NOT NULL UNIQUE,
    steps      JSONB NOT NULL DEFAULT '[]',
    extra      JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ
);

CREATE TABLE runbooks (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version         BIGINT NOT NULL,
    uuid            UUID NOT NULL UNIQUE,
    name            TEXT NOT NULL UNIQUE,
    steps           JSONB NOT NULL DEFAULT '[]',
    public          BOOLEAN NOT NULL DEFAULT FALSE,
    owner           TEXT,
    disable_ramdisk BOOLEAN NOT NULL DEFAULT FALSE,
    extra           JSONB NOT NULL DEFAULT '{}',
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ
);

CREATE INDEX runbooks_owner_idx ON runbooks (owner);
