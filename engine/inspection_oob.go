package engine

import (
	"context"
	"fmt"

	"castiron/storage"
)

// inspectOutOfBand is the inspect interface "redfish": the driver reads the
// hardware from the BMC, the conductor creates ports for its NICs and
// records the inventory and the properties, and the node returns to
// manageable in the same task (Ironic's RedfishInspect.inspect_hardware
// with its default hooks: validate-interfaces, ports, architecture). The
// node's power state is left alone.
func inspectOutOfBand(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return failed(err)
	}
	if hw.Inspector == nil {
		return failed(unsupportedExtension(n.Driver, "inspect_hardware"))
	}
	res, err := hw.Inspector.InspectHardware(ctx, driverNode(n))
	if err != nil {
		return failed(fmt.Errorf("Failed to inspect hardware. Reason: %v", err))
	}
	created, err := c.createPorts(ctx, n, res.MACs, "")
	if err != nil {
		return failed(fmt.Errorf("Failed to create ports from the inventory: %v", err))
	}
	c.cacheFirmware(ctx, hw, n) // Ironic's node_cache_firmware_components after inspection
	c.log.InfoContext(ctx, "out-of-band inspection done", "node", n.UUID, "state", n.ProvisionState, "verb", "inspect",
		"ports_created", created, "properties", res.Properties)
	return outcome{ev: EvDone, mutate: func(n *storage.Node) {
		for k, v := range res.Properties {
			n.Properties[k] = v
		}
		setBootModeCapability(n, res.BootMode, false)
		n.DriverInternalInfo[InventoryKey] = map[string]any{"inventory": res.Inventory, "plugin_data": map[string]any{}}
		now := c.now()
		n.InspectionFinishedAt = &now
	}}
}
