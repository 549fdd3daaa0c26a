-- Volume connectors and targets (API 1.32) and deploy templates (1.55).
-- Same conventions as 0001_init.sql: portable types, TEXT timestamps,
-- JSON documents that are never NULL.

-- A node's initiators for remote volumes. Ironic keeps (type,
-- connector_id) unique across all nodes.
CREATE TABLE volume_connectors (
    id           INTEGER PRIMARY KEY,
    uuid         TEXT NOT NULL UNIQUE,
    node_uuid    TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    type         TEXT NOT NULL,
    connector_id TEXT NOT NULL,
    extra        TEXT NOT NULL DEFAULT '{}',
    created_at   TEXT NOT NULL,
    updated_at   TEXT,
    UNIQUE (type, connector_id)
);

-- Serves the node filter and the ON DELETE CASCADE lookup.
CREATE INDEX volume_connectors_node_uuid_idx ON volume_connectors (node_uuid);

-- Remote volumes a node uses; one per boot_index on a node. The unique
-- (node_uuid, boot_index) index also serves node lookups and the cascade.
CREATE TABLE volume_targets (
    id          INTEGER PRIMARY KEY,
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

-- Deploy templates: named (by a trait) lists of deploy steps. Ironic keeps
-- the steps in a table of their own; here they are one JSON array of
-- {"interface", "step", "args", "priority"} objects in the template's order.
CREATE TABLE deploy_templates (
    id         INTEGER PRIMARY KEY,
    uuid       TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL UNIQUE,
    steps      TEXT NOT NULL DEFAULT '[]',
    extra      TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT
);
