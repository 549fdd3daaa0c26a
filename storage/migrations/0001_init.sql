-- castiron schema, version 1.
--
-- Portable on purpose: plain TEXT/INTEGER/BOOLEAN types, no SQLite-only
-- syntax, so a PostgreSQL store can start from this file (its id columns
-- need an identity type; SQLite's INTEGER PRIMARY KEY is the rowid, which
-- numbers rows in creation order). Timestamps are
-- TEXT in a fixed-width UTC format ("2006-01-02 15:04:05.000000") so that
-- string order is time order and microseconds survive. JSON columns hold an
-- object ('{}') or, for traits, an array ('[]'); never NULL.

CREATE TABLE nodes (
    id                     INTEGER PRIMARY KEY,
    uuid                   TEXT NOT NULL UNIQUE,
    name                   TEXT UNIQUE,
    driver                 TEXT NOT NULL,
    bios_interface         TEXT NOT NULL DEFAULT '',
    boot_interface         TEXT NOT NULL DEFAULT '',
    console_interface      TEXT NOT NULL DEFAULT '',
    deploy_interface       TEXT NOT NULL DEFAULT '',
    firmware_interface     TEXT NOT NULL DEFAULT '',
    inspect_interface      TEXT NOT NULL DEFAULT '',
    management_interface   TEXT NOT NULL DEFAULT '',
    network_interface      TEXT NOT NULL DEFAULT '',
    power_interface        TEXT NOT NULL DEFAULT '',
    raid_interface         TEXT NOT NULL DEFAULT '',
    rescue_interface       TEXT NOT NULL DEFAULT '',
    storage_interface      TEXT NOT NULL DEFAULT '',
    vendor_interface       TEXT NOT NULL DEFAULT '',
    provision_state        TEXT NOT NULL,
    target_provision_state TEXT,
    power_state            TEXT,
    target_power_state     TEXT,
    provision_updated_at   TEXT,
    inspection_started_at  TEXT,
    inspection_finished_at TEXT,
    last_error             TEXT,
    reservation            TEXT,
    maintenance            BOOLEAN NOT NULL DEFAULT FALSE,
    maintenance_reason     TEXT,
    fault                  TEXT,
    console_enabled        BOOLEAN NOT NULL DEFAULT FALSE,
    conductor_group        TEXT NOT NULL DEFAULT '',
    resource_class         TEXT,
    owner                  TEXT,
    lessee                 TEXT,
    description            TEXT,
    instance_uuid          TEXT UNIQUE,
    chassis_uuid           TEXT,
    allocation_uuid        TEXT,
    automated_clean        BOOLEAN,
    protected              BOOLEAN NOT NULL DEFAULT FALSE,
    protected_reason       TEXT,
    retired                BOOLEAN NOT NULL DEFAULT FALSE,
    retired_reason         TEXT,
    boot_mode              TEXT,
    secure_boot            BOOLEAN,
    shard                  TEXT,
    parent_node            TEXT,
    properties             TEXT NOT NULL DEFAULT '{}',
    driver_info            TEXT NOT NULL DEFAULT '{}',
    driver_internal_info   TEXT NOT NULL DEFAULT '{}',
    instance_info          TEXT NOT NULL DEFAULT '{}',
    extra                  TEXT NOT NULL DEFAULT '{}',
    clean_step             TEXT NOT NULL DEFAULT '{}',
    deploy_step            TEXT NOT NULL DEFAULT '{}',
    service_step           TEXT NOT NULL DEFAULT '{}',
    raid_config            TEXT NOT NULL DEFAULT '{}',
    target_raid_config     TEXT NOT NULL DEFAULT '{}',
    network_data           TEXT NOT NULL DEFAULT '{}',
    traits                 TEXT NOT NULL DEFAULT '[]',
    created_at             TEXT NOT NULL,
    updated_at             TEXT
);

-- Columns NodeQuery filters on. Each index also orders by id (the implicit
-- tail of every SQLite index), so "filter = ? AND id > ? ORDER BY id" walks
-- it without sorting.
CREATE INDEX nodes_provision_state_idx ON nodes (provision_state);
CREATE INDEX nodes_driver_idx ON nodes (driver);
CREATE INDEX nodes_conductor_group_idx ON nodes (conductor_group);
CREATE INDEX nodes_maintenance_idx ON nodes (maintenance);
CREATE INDEX nodes_retired_idx ON nodes (retired);
CREATE INDEX nodes_resource_class_idx ON nodes (resource_class);
CREATE INDEX nodes_owner_idx ON nodes (owner);
CREATE INDEX nodes_lessee_idx ON nodes (lessee);
-- Mostly-NULL columns get partial indexes: they serve "col = ?", and every
-- list query's "parent_node IS NULL" cannot lure the planner into an index
-- that holds nearly every row instead of the one that gives the sort order.
CREATE INDEX nodes_reservation_idx ON nodes (reservation) WHERE reservation IS NOT NULL;
CREATE INDEX nodes_fault_idx ON nodes (fault) WHERE fault IS NOT NULL;
CREATE INDEX nodes_chassis_uuid_idx ON nodes (chassis_uuid) WHERE chassis_uuid IS NOT NULL;
CREATE INDEX nodes_shard_idx ON nodes (shard) WHERE shard IS NOT NULL;
CREATE INDEX nodes_parent_node_idx ON nodes (parent_node) WHERE parent_node IS NOT NULL;
-- Sort keys a UI is likely to ask for; name and uuid have their UNIQUE index.
CREATE INDEX nodes_created_at_idx ON nodes (created_at);

CREATE TABLE ports (
    id                    INTEGER PRIMARY KEY,
    uuid                  TEXT NOT NULL UNIQUE,
    name                  TEXT UNIQUE,
    node_uuid             TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    portgroup_uuid        TEXT,
    address               TEXT NOT NULL UNIQUE,
    local_link_connection TEXT NOT NULL DEFAULT '{}',
    pxe_enabled           BOOLEAN NOT NULL DEFAULT TRUE,
    physical_network      TEXT,
    internal_info         TEXT NOT NULL DEFAULT '{}',
    extra                 TEXT NOT NULL DEFAULT '{}',
    is_smartnic           BOOLEAN NOT NULL DEFAULT FALSE,
    created_at            TEXT NOT NULL,
    updated_at            TEXT
);

-- node_uuid also serves the ON DELETE CASCADE lookup.
CREATE INDEX ports_node_uuid_idx ON ports (node_uuid);
CREATE INDEX ports_portgroup_uuid_idx ON ports (portgroup_uuid) WHERE portgroup_uuid IS NOT NULL;

CREATE TABLE conductors (
    hostname        TEXT PRIMARY KEY,
    conductor_group TEXT NOT NULL DEFAULT '',
    drivers         TEXT NOT NULL DEFAULT '[]',
    online          BOOLEAN NOT NULL DEFAULT TRUE,
    created_at      TEXT NOT NULL,
    updated_at      TEXT
);

CREATE TABLE node_history (
    id         INTEGER PRIMARY KEY,
    uuid       TEXT NOT NULL UNIQUE,
    node_uuid  TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    created_at TEXT NOT NULL,
    conductor  TEXT NOT NULL DEFAULT '',
    event_type TEXT NOT NULL DEFAULT '',
    severity   TEXT NOT NULL DEFAULT '',
    event      TEXT NOT NULL DEFAULT '',
    user_name  TEXT NOT NULL DEFAULT '',
    verb       TEXT NOT NULL DEFAULT '',
    from_state TEXT NOT NULL DEFAULT '',
    to_state   TEXT NOT NULL DEFAULT ''
);

CREATE INDEX node_history_node_uuid_created_at_idx ON node_history (node_uuid, created_at);
