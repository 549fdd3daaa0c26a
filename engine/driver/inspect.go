package driver

import "context"

// Inspector is out-of-band inspection (Ironic's inspect interface
// "redfish"): the hardware is read from the BMC while the node stays as it
// is, nothing boots. A hardware type offers it through
// HardwareType.Inspector; the engine applies the result.
type Inspector interface {
	InspectHardware(ctx context.Context, n Node) (*Inspection, error)
}

// Inspection is what an out-of-band inspection found.
type Inspection struct {
	// Inventory is in the shape of Ironic's inventory (cpu, memory, disks,
	// interfaces, system_vendor, boot), stored as the node's inspection
	// data (GET /v1/nodes/{id}/inventory).
	Inventory map[string]any
	// Properties are the node properties the inspection sets, overwriting
	// what is there (memory_mb, local_gb, cpu_arch), as Ironic's redfish
	// inspection does.
	Properties map[string]any
	// BootMode ("uefi", "bios" or "") becomes the boot_mode capability
	// unless the node already has one.
	BootMode string
	// MACs are the NICs' addresses (normalized, lower case) that get a
	// port when no port has them yet.
	MACs []string
}
