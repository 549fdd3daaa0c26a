-- Firmware components of a node (API 1.86, vendor/model/serial_number
-- 1.114), Ironic's firmware_information table: what the node's firmware
-- interface read from the BMC at the end of cleaning and after a
-- firmware.update step. One row per (node, component); initial_version is
-- the first version seen, last_version_flashed the version an update
-- brought. Same conventions as 0001_init.sql.
CREATE TABLE firmware_information (
    id                   INTEGER PRIMARY KEY,
    node_uuid            TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    component            TEXT NOT NULL,
    initial_version      TEXT NOT NULL,
    current_version      TEXT,
    last_version_flashed TEXT,
    vendor               TEXT,
    model                TEXT,
    serial_number        TEXT,
    created_at           TEXT NOT NULL,
    updated_at           TEXT,
    UNIQUE (node_uuid, component)
);
