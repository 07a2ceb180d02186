-- The inspection service's state (issue 21), which it kept in memory before: its node cache
-- (one introspection per node, with the MACs and BMC addresses the ramdisk's data is matched
-- against, which also drive the PXE filter), the data it stored, and its rules.

CREATE TABLE introspections (
    node_uuid     UUID PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    state         TEXT NOT NULL,
    manage_boot   BOOLEAN NOT NULL DEFAULT TRUE,
    macs          JSONB NOT NULL DEFAULT '[]',
    bmc_addresses JSONB NOT NULL DEFAULT '[]',
    error         TEXT,
    started_at    TIMESTAMPTZ NOT NULL,
    finished_at   TIMESTAMPTZ
);

CREATE INDEX introspections_started_at_idx ON introspections (started_at);

CREATE TABLE introspection_data (
    node_uuid  UUID PRIMARY KEY REFERENCES introspections (node_uuid) ON DELETE CASCADE,
    data       JSONB NOT NULL DEFAULT '{}',
    created_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE introspection_rules (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uuid        UUID NOT NULL UNIQUE,
    description TEXT,
    scope       TEXT,
    conditions  JSONB NOT NULL DEFAULT '[]',
    actions     JSONB NOT NULL DEFAULT '[]',
    created_at  TIMESTAMPTZ NOT NULL
);
