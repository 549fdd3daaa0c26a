-- What inspection learnt identifies a machine besides its MACs: the BMC's
-- address and MAC read in-band, the SMBIOS system UUID and serial number.
-- Discovery looks machines up here so that one booting again (from
-- another NIC, after its ports were deleted) does not become a second
-- node. Not unique: firmware placeholders repeat across machines.
CREATE TABLE hardware_identities (
    node_uuid TEXT NOT NULL REFERENCES nodes (uuid) ON DELETE CASCADE,
    kind      TEXT NOT NULL,
    value     TEXT NOT NULL,
    PRIMARY KEY (node_uuid, kind, value)
);

CREATE INDEX hardware_identities_value_idx ON hardware_identities (kind, value);
