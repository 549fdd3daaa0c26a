package engine

import "castiron/engine/driver"

// Vendor hardware types: Ironic's idrac and ilo5 compositions, built on
// castiron's Redfish driver. The interface names are Ironic's, so a client
// that asks for them by name (Metal3's baremetal-operator for idrac-redfish://,
// idrac-virtualmedia:// and ilo5:// hosts) gets a node; the behaviour is
// the Redfish code's, with the vendor differences castiron acts on:
//   - iDRAC: virtual media lives under the Manager (iDRAC.Embedded.1), its
//     slots are "CD" and "RemovableDisk"; a reset to the state the system
//     is already in answers 409, which the driver takes as done. Ironic's
//     idrac-redfish-virtual-media sets the CD boot through a Dell OEM
//     action (sushy-oem-idrac's set_virtual_boot_device) where castiron
//     sets the standard BootSourceOverrideTarget Cd after inserting the
//     ISO, as for redfish-virtual-media (what the emulator's idrac flavour
//     serves; not verified on iDRAC hardware, see docs/metal3.md).
//   - iLO 5: virtual media under the Manager (slot "2" is the CD, "1" the
//     USB stick/floppy), every @odata.id with a trailing slash, session
//     Location absolute, Legacy boot mode by default.
//
// Interfaces other helpers add (bios/raid/firmware) join the lists where
// Ironic has them (idrac: bios and raid idrac-redfish, firmware redfish;
// ilo5: bios ilo, raid ilo5).

// Boot interfaces by how they start castiron's ramdisk.
const (
	// BootIDRACVirtualMedia is the idrac type's virtual media boot.
	BootIDRACVirtualMedia = "idrac-redfish-virtual-media"
	// BootILOVirtualMedia is the ilo5 type's virtual media boot.
	BootILOVirtualMedia = "ilo-virtual-media"
	// BootRedfishHTTPS is UEFI HTTP boot of the ramdisk ISO through the
	// BMC (Redfish UefiHttp + HttpBootUri).
	BootRedfishHTTPS = "redfish-https"
	// BootILOHTTPS is the ilo5 type's UEFI HTTPS boot.
	BootILOHTTPS = "ilo-uefi-https"
)

// NewIDRACHardware is Ironic's idrac type over the Redfish driver:
// power, management, inspect and vendor "idrac-redfish"; boot by
// iPXE/PXE/HTTP or idrac-redfish-virtual-media.
func NewIDRACHardware(d RedfishDriver, props []driver.Property) *HardwareType {
	hw := &HardwareType{
		Name: "idrac",
		Interfaces: map[string][]string{
			"bios":       {"no-bios"},
			"boot":       {"ipxe", "pxe", "http", BootIDRACVirtualMedia},
			"console":    {"no-console"},
			"deploy":     {"direct", "ramdisk", "custom-agent"},
			"firmware":   {"no-firmware"},
			"inspect":    {"idrac-redfish", "agent", "no-inspect"},
			"management": {"idrac-redfish"},
			"network":    {"noop", "flat"},
			"power":      {"idrac-redfish"},
			"raid":       {"no-raid", "agent"},
			"rescue":     {"no-rescue", "agent"},
			"storage":    {"noop"},
			"vendor":     {"idrac-redfish", "no-vendor"},
		},
		Power:      d,
		Management: d,
		Inspector:  d,
		Properties: props,
	}
	// BIOS through iDRAC's job queue, RAID as idrac-redfish (the Redfish
	// code; Dell's own RAID-mode conversion is not done), firmware by
	// Redfish: what Ironic's idrac type lists and BMO sends.
	if b, ok := any(d).(BIOSProvider); ok {
		WithBIOS(hw, "idrac-redfish", b.BIOSInterface("idrac-redfish"))
	}
	return WithRedfishFirmwareRAID(hw, d, "idrac-redfish")
}

// NewILO5Hardware is the ilo5 type. Ironic's ilo5 drives iLO through
// proliantutils (RIBCL and iLO's REST API); castiron drives iLO 5 through
// its standard Redfish service instead, keeping Ironic's interface names
// (power "ilo", management "ilo5", boot ilo-virtual-media/ilo-pxe/
// ilo-ipxe/ilo-uefi-https, inspect "ilo") and its driver_info keys
// (ilo_address, ilo_username, ilo_password, client_port, ilo_verify_ca,
// read by the Redfish driver as the BMC at https://ilo_address, system
// /redfish/v1/Systems/1), so a node enrolled for Ironic's ilo5 enrols
// here unchanged. Hosts Metal3 addresses as ilo5-redfish:// or
// ilo5-virtualmedia:// use the redfish type, as BMO maps them.
func NewILO5Hardware(d RedfishDriver, props []driver.Property) *HardwareType {
	return &HardwareType{
		Name: "ilo5",
		Interfaces: map[string][]string{
			"bios":       {"no-bios"},
			"boot":       {BootILOVirtualMedia, "ilo-pxe", "ilo-ipxe", BootILOHTTPS},
			"console":    {"no-console"},
			"deploy":     {"direct", "ramdisk", "custom-agent"},
			"firmware":   {"no-firmware"},
			"inspect":    {"ilo", "agent", "no-inspect"},
			"management": {"ilo5"},
			"network":    {"noop", "flat"},
			"power":      {"ilo"},
			"raid":       {"no-raid", "agent"},
			"rescue":     {"no-rescue", "agent"},
			"storage":    {"noop"},
			"vendor":     {"no-vendor"},
		},
		Power:      d,
		Management: d,
		Inspector:  d,
		Properties: props,
	}
}

// How a boot interface starts the ramdisk: by the network (DHCP +
// PXE/iPXE/HTTP from castiron's boot server: every name not below), from
// an ISO the BMC attaches as virtual media, or from that ISO fetched by the
// firmware's UEFI HTTP boot.
type bootMethod int

const (
	bootNetwork bootMethod = iota
	bootVirtualMedia
	bootUEFIHTTP
)

var bootMethods = map[string]bootMethod{
	BootVirtualMedia:      bootVirtualMedia,
	BootIDRACVirtualMedia: bootVirtualMedia,
	BootILOVirtualMedia:   bootVirtualMedia,
	BootRedfishHTTPS:      bootUEFIHTTP,
	BootILOHTTPS:          bootUEFIHTTP,
}

// bootMethodOf is how the node's boot interface starts the ramdisk.
func bootMethodOf(bootInterface string) bootMethod { return bootMethods[bootInterface] }

// isoBoot reports whether the boot interface boots castiron's ramdisk ISO
// (virtual media or UEFI HTTP): no DHCP/PXE from castiron involved.
func isoBoot(bootInterface string) bool { return bootMethodOf(bootInterface) != bootNetwork }
