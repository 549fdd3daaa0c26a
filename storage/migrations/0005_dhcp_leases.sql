-- DHCP leases of the embedded DHCP server (pxe/dhcp), keyed on the client's
-- hardware address: the same machine sends no client identifier (option 61)
-- from its firmware but one from iPXE and the ramdisk, and must keep one
-- address through all three. An expired row is kept: it is the address the
-- MAC gets again unless another MAC needed it meanwhile.
CREATE TABLE dhcp_leases (
    mac        TEXT PRIMARY KEY,
    ip         TEXT NOT NULL UNIQUE,
    expires_at TEXT NOT NULL,
    node_uuid  TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
) WITHOUT ROWID;
