-- Node firmware components (API 1.86), written by the firmware interface.

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
