package inventory

import (
	"path/filepath"
	"strings"

	"castiron/ramdisk/protocol"
)

// readSystemVendor reads the DMI identity the kernel exports. Serial
// numbers are readable by root only, which the agent is.
func readSystemVendor(root Root) protocol.SystemVendor {
	dmi := func(name string) string { return readLine(filepath.Join(root.Sys, "class/dmi/id", name)) }
	return protocol.SystemVendor{
		ProductName:  dmi("product_name"),
		SerialNumber: dmi("product_serial"),
		Manufacturer: dmi("sys_vendor"),
		SystemUUID:   strings.ToLower(dmi("product_uuid")),
		Firmware: protocol.Firmware{
			Vendor:    dmi("bios_vendor"),
			Version:   dmi("bios_version"),
			BuildDate: dmi("bios_date"),
		},
	}
}

// bootMode: the kernel exposes /sys/firmware/efi only when booted by UEFI.
func bootMode(root Root) string {
	if exists(filepath.Join(root.Sys, "firmware/efi")) {
		return "uefi"
	}
	return "bios"
}
