-- The whole current schema for postgres, written fresh. Keep it equal to what the migrations in
-- migrations/postgres/ produce: tests/db/schema.rs checks, and prints the difference if not.

CREATE TABLE chassis (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version     BIGINT NOT NULL,
    uuid        UUID NOT NULL UNIQUE,
    description TEXT,
    extra       JSONB NOT NULL DEFAULT '{}',
    created_at  TIMESTAMPTZ NOT NULL,
    updated_at  TIMESTAMPTZ
);

CREATE TABLE nodes (
    id                     BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version                BIGINT NOT NULL,
    uuid                   UUID NOT NULL UNIQUE,
    name                   TEXT UNIQUE,
    description            TEXT,
    driver                 TEXT NOT NULL,
    driver_info            JSONB NOT NULL DEFAULT '{}',
    driver_internal_info   JSONB NOT NULL DEFAULT '{}',
    properties             JSONB NOT NULL DEFAULT '{}',
    instance_info          JSONB NOT NULL DEFAULT '{}',
    extra                  JSONB NOT NULL DEFAULT '{}',
    instance_uuid          UUID UNIQUE,
    instance_name          TEXT,
    chassis_uuid           UUID REFERENCES chassis (uuid),
    parent_node            UUID,
    allocation_uuid        UUID,
    provision_state        TEXT NOT NULL,
    target_provision_state TEXT,
    provision_updated_at   TIMESTAMPTZ,
    power_state            TEXT,
    target_power_state     TEXT,
    last_error             TEXT,
    console_enabled        BOOLEAN NOT NULL DEFAULT FALSE,
    fault                  TEXT,
    health                 TEXT,
    maintenance            BOOLEAN NOT NULL DEFAULT FALSE,
    maintenance_reason     TEXT,
    protected              BOOLEAN NOT NULL DEFAULT FALSE,
    protected_reason       TEXT,
    retired                BOOLEAN NOT NULL DEFAULT FALSE,
    retired_reason         TEXT,
    disable_power_off      BOOLEAN NOT NULL DEFAULT FALSE,
    automated_clean        BOOLEAN,
    inspection_started_at  TIMESTAMPTZ,
    inspection_finished_at TIMESTAMPTZ,
    clean_step             JSONB NOT NULL DEFAULT '{}',
    deploy_step            JSONB NOT NULL DEFAULT '{}',
    service_step           JSONB NOT NULL DEFAULT '{}',
    raid_config            JSONB NOT NULL DEFAULT '{}',
    target_raid_config     JSONB NOT NULL DEFAULT '{}',
    network_data           JSONB NOT NULL DEFAULT '{}',
    boot_mode              TEXT,
    secure_boot            BOOLEAN,
    bios_interface         TEXT,
    boot_interface         TEXT,
    console_interface      TEXT,
    deploy_interface       TEXT,
    firmware_interface     TEXT,
    inspect_interface      TEXT,
    management_interface   TEXT,
    network_interface      TEXT,
    power_interface        TEXT,
    raid_interface         TEXT,
    rescue_interface       TEXT,
    storage_interface      TEXT,
    vendor_interface       TEXT,
    resource_class         TEXT,
    conductor_group        TEXT NOT NULL DEFAULT '',
    shard                  TEXT,
    owner                  TEXT,
    lessee                 TEXT,
    traits                 JSONB NOT NULL DEFAULT '[]',
    created_at             TIMESTAMPTZ NOT NULL,
    updated_at             TIMESTAMPTZ
);

-- The list filters, and the conductor's "which nodes have waited too long in state X" scan.
CREATE INDEX nodes_provision_state_idx ON nodes (provision_state, provision_updated_at);
CREATE INDEX nodes_driver_idx ON nodes (driver);
CREATE INDEX nodes_conductor_group_idx ON nodes (conductor_group);
CREATE INDEX nodes_resource_class_idx ON nodes (resource_class);
CREATE INDEX nodes_owner_idx ON nodes (owner);
CREATE INDEX nodes_lessee_idx ON nodes (lessee);
CREATE INDEX nodes_chassis_uuid_idx ON nodes (chassis_uuid);
CREATE INDEX nodes_shard_idx ON nodes (shard);
CREATE INDEX nodes_parent_node_idx ON nodes (parent_node);
CREATE INDEX nodes_created_at_idx ON nodes (created_at);

CREATE TABLE portgroups (
    id                         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version                    BIGINT NOT NULL,
    uuid                       UUID NOT NULL UNIQUE,
    name                       TEXT UNIQUE,
    address                    TEXT UNIQUE,
    node_uuid                  UUID NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    extra                      JSONB NOT NULL DEFAULT '{}',
    internal_info              JSONB NOT NULL DEFAULT '{}',
    standalone_ports_supported BOOLEAN NOT NULL DEFAULT TRUE,
    mode                       TEXT,
    properties                 JSONB NOT NULL DEFAULT '{}',
    physical_network           TEXT,
    category                   TEXT,
    dynamic_portgroup          BOOLEAN NOT NULL DEFAULT FALSE,
    created_at                 TIMESTAMPTZ NOT NULL,
    updated_at                 TIMESTAMPTZ
);

CREATE INDEX portgroups_node_uuid_idx ON portgroups (node_uuid);

CREATE TABLE ports (
    id                              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    version                         BIGINT NOT NULL,
    uuid                            UUID NOT NULL UNIQUE,
    address                         TEXT NOT NULL UNIQUE,
    node_uuid                       UUID NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    portgroup_uuid                  UUID REFERENCES portgroups (uuid),
    name                            TEXT UNIQUE,
    description                     TEXT,
    extra                           JSONB NOT NULL DEFAULT '{}',
    internal_info                   JSONB NOT NULL DEFAULT '{}',
    local_link_connection           JSONB NOT NULL DEFAULT '{}',
    pxe_enabled                     BOOLEAN NOT NULL DEFAULT TRUE,
    physical_network                TEXT,
    is_smartnic                     BOOLEAN NOT NULL DEFAULT FALSE,
    vendor                          TEXT,
    category                        TEXT,
    available_for_dynamic_portgroup BOOLEAN NOT NULL DEFAULT FALSE,
    created_at                      TIMESTAMPTZ NOT NULL,
    updated_at                      TIMESTAMPTZ
);

CREATE INDEX ports_node_uuid_idx ON ports (node_uuid);
CREATE INDEX ports_portgroup_uuid_idx ON ports (portgroup_uuid);

CREATE TABLE conductors (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    hostname        TEXT NOT NULL UNIQUE,
    conductor_group TEXT NOT NULL DEFAULT '',
    drivers         JSONB NOT NULL DEFAULT '[]',
    online          BOOLEAN NOT NULL DEFAULT TRUE,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    liveness_lock   BOOLEAN NOT NULL DEFAULT FALSE
);

-- At most one lease per node; the row exists only while someone holds (or held and did not
-- release) the node.
CREATE TABLE node_leases (
    node_uuid   UUID PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    holder      TEXT NOT NULL,
    acquired_at TIMESTAMPTZ NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL,
    -- The fencing token of this grant (leases.rs).
    generation  BIGINT NOT NULL DEFAULT 0
);

CREATE INDEX node_leases_expires_at_idx ON node_leases (expires_at);
CREATE INDEX node_leases_holder_idx ON node_leases (holder);

-- Where lease generations come from: each grant takes the next number.
CREATE SEQUENCE node_lease_generation;

CREATE TABLE node_history (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    uuid       UUID NOT NULL UNIQUE,
    node_uuid  UUID NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    created_at TIMESTAMPTZ NOT NULL,
    severity   TEXT NOT NULL,
    event_type TEXT NOT NULL,
    event      TEXT NOT NULL,
    conductor  TEXT,
    user_name  TEXT
);

CREATE INDEX node_history_node_uuid_idx ON node_history (node_uuid, id);

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

CREATE TABLE node_firmware_components (
    node_uuid            UUID NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    component            TEXT NOT NULL,
    initial_version      TEXT NOT NULL,
    current_version      TEXT NOT NULL,
    last_version_flashed TEXT,
    created_at           TIMESTAMPTZ NOT NULL,
    updated_at           TIMESTAMPTZ,
    PRIMARY KEY (node_uuid, component)
);

CREATE TABLE conductor_requests (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conductor  TEXT NOT NULL,
    node_uuid  UUID NOT NULL,
    body       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    deadline   TIMESTAMPTZ NOT NULL,
    claimed_at TIMESTAMPTZ,
    reply      TEXT,
    replied_at TIMESTAMPTZ
);

CREATE INDEX conductor_requests_pending_idx ON conductor_requests (conductor, id)
    WHERE claimed_at IS NULL;

CREATE TABLE node_abort_requests (
    node_uuid    UUID PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    requested_at TIMESTAMPTZ NOT NULL
);

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
    updated_at      TIMESTAMPTZ,
    traits          JSONB NOT NULL DEFAULT '[]',
    description     TEXT
);

CREATE INDEX runbooks_owner_idx ON runbooks (owner);

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
