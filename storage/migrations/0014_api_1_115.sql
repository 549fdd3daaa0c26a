-- Ironic API 1.93 - 1.115 (issue 25): the new fields of nodes, ports,
-- portgroups and node history. Defaults are Ironic's, so that rows written
-- before keep their meaning.
-- Nodes: disable_power_off (1.95), instance_name (1.104), health (1.109,
-- filled by power sync from the BMC).
ALTER TABLE nodes ADD COLUMN disable_power_off BOOLEAN NOT NULL DEFAULT FALSE;
ALTER TABLE nodes ADD COLUMN instance_name TEXT;
ALTER TABLE nodes ADD COLUMN health TEXT;
CREATE INDEX nodes_instance_name_idx ON nodes (instance_name) WHERE instance_name IS NOT NULL;
-- Ports: description (1.97), vendor (1.100), category (1.101),
-- available_for_dynamic_portgroup (1.111).
ALTER TABLE ports ADD COLUMN description TEXT;
ALTER TABLE ports ADD COLUMN vendor TEXT;
ALTER TABLE ports ADD COLUMN category TEXT;
ALTER TABLE ports ADD COLUMN available_for_dynamic_portgroup BOOLEAN NOT NULL DEFAULT TRUE;
-- Portgroups: physical_network (1.102), category (1.103),
-- dynamic_portgroup (1.111, read-only).
ALTER TABLE portgroups ADD COLUMN physical_network TEXT;
ALTER TABLE portgroups ADD COLUMN category TEXT;
ALTER TABLE portgroups ADD COLUMN dynamic_portgroup BOOLEAN NOT NULL DEFAULT FALSE;
-- Node history: project (1.113); target_provision_state and
-- duration_seconds (1.115; its "state" is to_state).
ALTER TABLE node_history ADD COLUMN project TEXT NOT NULL DEFAULT '';
ALTER TABLE node_history ADD COLUMN target_provision_state TEXT NOT NULL DEFAULT '';
ALTER TABLE node_history ADD COLUMN duration_seconds BIGINT;
