-- The whole current schema for sqlite, written fresh. Keep it equal to what the migrations in
-- migrations/sqlite/ produce: tests/db/schema.rs checks, and prints the difference if not.

CREATE TABLE chassis (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    version     INTEGER NOT NULL,
    uuid        TEXT NOT NULL UNIQUE,
    description TEXT,
    extra       TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    updated_at  TEXT
);

CREATE TABLE nodes (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    version                INTEGER NOT NULL,
    uuid                   TEXT NOT NULL UNIQUE,
    name                   TEXT UNIQUE,
    description            TEXT,
    driver                 TEXT NOT NULL,
    driver_info            TEXT NOT NULL DEFAULT '{}',
    driver_internal_info   TEXT NOT NULL DEFAULT '{}',
    properties             TEXT NOT NULL DEFAULT '{}',
    instance_info          TEXT NOT NULL DEFAULT '{}',
    extra                  TEXT NOT NULL DEFAULT '{}',
    instance_uuid          TEXT UNIQUE,
    instance_name          TEXT,
    chassis_uuid           TEXT REFERENCES chassis (uuid),
    parent_node            TEXT,
    allocation_uuid        TEXT,
    provision_state        TEXT NOT NULL,
    target_provision_state TEXT,
    provision_updated_at   TEXT,
    power_state            TEXT,
    target_power_state     TEXT,
    last_error             TEXT,
    console_enabled        BOOLEAN NOT NULL DEFAULT 0,
    fault                  TEXT,
    health                 TEXT,
    maintenance            BOOLEAN NOT NULL DEFAULT 0,
    maintenance_reason     TEXT,
    protected              BOOLEAN NOT NULL DEFAULT 0,
    protected_reason       TEXT,
    retired                BOOLEAN NOT NULL DEFAULT 0,
    retired_reason         TEXT,
    disable_power_off      BOOLEAN NOT NULL DEFAULT 0,
    automated_clean        BOOLEAN,
    inspection_started_at  TEXT,
    inspection_finished_at TEXT,
    clean_step             TEXT NOT NULL DEFAULT '{}',
    deploy_step            TEXT NOT NULL DEFAULT '{}',
    service_step           TEXT NOT NULL DEFAULT '{}',
    raid_config            TEXT NOT NULL DEFAULT '{}',
    target_raid_config     TEXT NOT NULL DEFAULT '{}',
    network_data           TEXT NOT NULL DEFAULT '{}',
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
    traits                 TEXT NOT NULL DEFAULT '[]',
    created_at             TEXT NOT NULL,
    updated_at             TEXT
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
    id                         INTEGER PRIMARY KEY AUTOINCREMENT,
    version                    INTEGER NOT NULL,
    uuid                       TEXT NOT NULL UNIQUE,
    name                       TEXT UNIQUE,
    address                    TEXT UNIQUE,
    node_uuid                  TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    extra                      TEXT NOT NULL DEFAULT '{}',
    internal_info              TEXT NOT NULL DEFAULT '{}',
    standalone_ports_supported BOOLEAN NOT NULL DEFAULT 1,
    mode                       TEXT,
    properties                 TEXT NOT NULL DEFAULT '{}',
    physical_network           TEXT,
    category                   TEXT,
    dynamic_portgroup          BOOLEAN NOT NULL DEFAULT 0,
    created_at                 TEXT NOT NULL,
    updated_at                 TEXT
);

CREATE INDEX portgroups_node_uuid_idx ON portgroups (node_uuid);

CREATE TABLE ports (
    id                              INTEGER PRIMARY KEY AUTOINCREMENT,
    version                         INTEGER NOT NULL,
    uuid                            TEXT NOT NULL UNIQUE,
    address                         TEXT NOT NULL UNIQUE,
    node_uuid                       TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    portgroup_uuid                  TEXT REFERENCES portgroups (uuid),
    name                            TEXT UNIQUE,
    description                     TEXT,
    extra                           TEXT NOT NULL DEFAULT '{}',
    internal_info                   TEXT NOT NULL DEFAULT '{}',
    local_link_connection           TEXT NOT NULL DEFAULT '{}',
    pxe_enabled                     BOOLEAN NOT NULL DEFAULT 1,
    physical_network                TEXT,
    is_smartnic                     BOOLEAN NOT NULL DEFAULT 0,
    vendor                          TEXT,
    category                        TEXT,
    available_for_dynamic_portgroup BOOLEAN NOT NULL DEFAULT 0,
    created_at                      TEXT NOT NULL,
    updated_at                      TEXT
);

CREATE INDEX ports_node_uuid_idx ON ports (node_uuid);
CREATE INDEX ports_portgroup_uuid_idx ON ports (portgroup_uuid);

CREATE TABLE conductors (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    hostname        TEXT NOT NULL UNIQUE,
    conductor_group TEXT NOT NULL DEFAULT '',
    drivers         TEXT NOT NULL DEFAULT '[]',
    online          BOOLEAN NOT NULL DEFAULT 1,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    liveness_lock   BOOLEAN NOT NULL DEFAULT 0
);

-- At most one lease per node; the row exists only while someone holds (or held and did not
-- release) the node.
CREATE TABLE node_leases (
    node_uuid   TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    holder      TEXT NOT NULL,
    acquired_at TEXT NOT NULL,
    expires_at  TEXT NOT NULL,
    -- The fencing token of this grant (leases.rs).
    generation  INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX node_leases_expires_at_idx ON node_leases (expires_at);
CREATE INDEX node_leases_holder_idx ON node_leases (holder);

-- Where lease generations come from: one row, each grant takes the next number.
CREATE TABLE node_lease_generation (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);

CREATE TABLE node_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    uuid       TEXT NOT NULL UNIQUE,
    node_uuid  TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    severity   TEXT NOT NULL,
    event_type TEXT NOT NULL,
    event      TEXT NOT NULL,
    conductor  TEXT,
    user_name  TEXT
);

CREATE INDEX node_history_node_uuid_idx ON node_history (node_uuid, id);

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

CREATE TABLE node_firmware_components (
    node_uuid            TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    component            TEXT NOT NULL,
    initial_version      TEXT NOT NULL,
    current_version      TEXT NOT NULL,
    last_version_flashed TEXT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT,
    PRIMARY KEY (node_uuid, component)
);

CREATE TABLE conductor_requests (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    conductor  TEXT NOT NULL,
    node_uuid  TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deadline   TEXT NOT NULL,
    claimed_at TEXT,
    reply      TEXT,
    replied_at TEXT
);

CREATE INDEX conductor_requests_pending_idx ON conductor_requests (conductor, id)
    WHERE claimed_at IS NULL;

CREATE TABLE node_abort_requests (
    node_uuid    TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    requested_at TEXT NOT NULL
);

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
    updated_at      TEXT,
    traits          TEXT NOT NULL DEFAULT '[]',
    description     TEXT
);

CREATE INDEX runbooks_owner_idx ON runbooks (owner);

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
