-- Allocations (API 1.52), node BIOS settings (1.40) and node inventories (1.81).

CREATE TABLE allocations (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version         BIGINT NOT NULL,
    uuid            UUID NOT NULL UNIQUE,
    name            TEXT UNIQUE,
    node_uuid       UUID UNIQUE REFERENCES nodes (uuid) ON DELETE CASCADE,
    state           TEXT NOT NULL,
    last_error      TEXT,
    resource_class  TEXT,
    traits          JSONB NOT NULL DEFAULT '[]',
    candidate_nodes JSONB NOT NULL DEFAULT '[]',
    extra           JSONB NOT NULL DEFAULT '{}',
    owner           TEXT,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ
);

CREATE INDEX allocations_state_idx ON allocations (state);

CREATE TABLE node_bios_settings (
    node_uuid  UUID NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      TEXT,
    registry   JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL,
    updated_at TIMESTAMPTZ,
    PRIMARY KEY (node_uuid, name)
);

CREATE TABLE node_inventories (
    node_uuid   UUID PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    inventory   JSONB NOT NULL DEFAULT '{}',
    plugin_data JSONB NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ
);
