-- DHCPv6 leases (pxe/dhcp's Server6), the same shape as dhcp_leases and for
-- the same reason keyed on the MAC, not on the DUID: firmware, iPXE and the
-- ramdisk each send their own DUID, and one machine keeps one address
-- through all three. A machine may hold an IPv4 and an IPv6 lease at once.
CREATE TABLE dhcp6_leases (
    mac        TEXT PRIMARY KEY,
    ip         TEXT NOT NULL UNIQUE,
    expires_at TEXT NOT NULL,
    node_uuid  TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
