-- Chassis (API 1.1) and portgroups (API 1.23).
--
-- Same conventions as 0001: portable types, fixed-width UTC TEXT times, JSON
-- objects never NULL.
--
-- nodes.chassis_uuid (0001) has no FOREIGN KEY: SQLite cannot add one to an
-- existing table without rebuilding it. The engine checks that the chassis
-- exists when a node names one, and DeleteChassis refuses, inside its write
-- transaction, a chassis that nodes still name (Ironic's ChassisNotEmpty).
-- ports.portgroup_uuid likewise: the engine checks membership, and
-- DeletePortgroup refuses a portgroup that still has ports.

CREATE TABLE chassis (
    id          INTEGER PRIMARY KEY,
    uuid        TEXT NOT NULL UNIQUE,
    description TEXT,
    extra       TEXT NOT NULL DEFAULT '{}',
    created_at  TEXT NOT NULL,
    updated_at  TEXT
);

CREATE TABLE portgroups (
    id                         INTEGER PRIMARY KEY,
    uuid                       TEXT NOT NULL UNIQUE,
    name                       TEXT UNIQUE,
    -- A node's portgroups go with it, as Ironic's destroy_node removes them.
    node_uuid                  TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    address                    TEXT UNIQUE,
    extra                      TEXT NOT NULL DEFAULT '{}',
    internal_info              TEXT NOT NULL DEFAULT '{}',
    standalone_ports_supported BOOLEAN NOT NULL DEFAULT TRUE,
    mode                       TEXT,
    properties                 TEXT NOT NULL DEFAULT '{}',
    created_at                 TEXT NOT NULL,
    updated_at                 TEXT
);

-- node_uuid also serves the ON DELETE CASCADE lookup.
CREATE INDEX portgroups_node_uuid_idx ON portgroups (node_uuid);
