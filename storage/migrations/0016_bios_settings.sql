-- BIOS settings cached from a node's BMC (Ironic's bios_settings table):
-- the current value of each setting with what the BMC's attribute
-- registry says of it (API 1.74 fields). Rewritten whole each time the
-- conductor reads the BMC (cache_bios_settings). allowable_values is a
-- JSON array or NULL. Same conventions as 0001_init.sql.
CREATE TABLE bios_settings (
    node_uuid        TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    name             TEXT NOT NULL,
    value            TEXT,
    attribute_type   TEXT,
    allowable_values TEXT,
    lower_bound      BIGINT,
    upper_bound      BIGINT,
    min_length       BIGINT,
    max_length       BIGINT,
    read_only        BOOLEAN,
    reset_required   BOOLEAN,
    is_unique        BOOLEAN,
    created_at       TEXT NOT NULL,
    updated_at       TEXT,
    PRIMARY KEY (node_uuid, name)
);
