-- The boot timeline: what each machine did on the provisioning network
-- (DHCP, TFTP, HTTP boot, agent calls), so "inspection timed out" can be
-- diagnosed without tcpdump. Not tied to nodes by a foreign key: unknown
-- MACs have no node, and a node's timeline outlives a re-enrolment.
CREATE TABLE boot_events (
    id         INTEGER PRIMARY KEY,
    at         TEXT NOT NULL,
    mac        TEXT NOT NULL DEFAULT '',
    node_uuid  TEXT NOT NULL DEFAULT '',
    kind       TEXT NOT NULL,
    detail     TEXT NOT NULL DEFAULT ''
);

CREATE INDEX boot_events_node_idx ON boot_events (node_uuid, id);
CREATE INDEX boot_events_mac_idx ON boot_events (mac, id);
