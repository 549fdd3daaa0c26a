package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/google/uuid"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// InventoryKey is the driver_internal_info key under which a node's
// inspection data is kept as {"inventory": ..., "plugin_data": ...}.
const InventoryKey = "castiron_inventory"

// minRootDiskBytes is Ironic's default for the smallest disk that can be a
// root disk when no hints are given (4 GiB).
const minRootDiskBytes = 4 << 30

// Inspection is what a ramdisk posted to /v1/continue_inspection, checked
// by the ramdisk package.
type Inspection struct {
	Data       protocol.InspectionData
	PluginData map[string]any // every top-level key but "inventory"
	Inventory  map[string]any // the inventory as posted, kept verbatim
	NodeUUID   string         // ?node_uuid= (1.84+), may be empty
	WantToken  bool           // 1.84+: answer with node, config and a token
}

// ContinueInspection finds the node the inventory came from (Ironic's
// lookup_node: node_uuid, MACs, BMC address; castiron adds "the only node
// without ports in inspect wait", for nodes enrolled without ports), checks
// that it is in inspect wait, and hands the data to a background task that
// applies it. Every refusal is the same 404 so a ramdisk learns nothing.
func (c *Conductor) ContinueInspection(ctx context.Context, in Inspection) (*storage.Node, string, error) {
	n, err := c.inspectionNode(ctx, in)
	created := false
	if errors.Is(err, errNoMatch) && c.cfg.Discovery && in.NodeUUID == "" {
		n, created, err = c.discover(ctx, in)
	}
	if err != nil {
		return nil, "", err
	}
	if State(n.ProvisionState) == Enroll {
		return c.continueDiscovery(ctx, n, in, created)
	}
	token := ""
	if in.WantToken {
		if _, token, err = c.issueToken(ctx, n.UUID); err != nil {
			return nil, "", err
		}
	}
	var task work = applyInspection(in)
	ev := EvResume
	var msg *string
	if in.Data.Error != "" {
		ev, task = EvFail, abortTask(InspectWait)
		msg = strp(fmt.Sprintf("Ramdisk reported error: %s", in.Data.Error))
	}
	updated, err := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		if State(cur.ProvisionState) != InspectWait || cur.Reservation != nil {
			return nil, errAgentNotFound()
		}
		e := c.fire(ctx, cur, ev, noTargetState, msg)
		if ev == EvFail {
			now := c.now()
			cur.InspectionFinishedAt = &now
		}
		cur.Reservation = strp(c.cfg.Hostname)
		e.User = "agent"
		return e, nil
	})
	if err != nil {
		return nil, "", err
	}
	c.runTask(ctx, updated, "continue_inspection", task)
	return updated, token, nil
}

// continueDiscovery applies inspection data to a discovered node in
// enroll (just created, reserved; or booting again): no state changes,
// as in Ironic.
func (c *Conductor) continueDiscovery(ctx context.Context, n *storage.Node, in Inspection, created bool) (*storage.Node, string, error) {
	if !created {
		var err error
		n, err = c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
			if !discovered(cur) || cur.Reservation != nil {
				return nil, errAgentNotFound()
			}
			cur.Reservation = strp(c.cfg.Hostname)
			return nil, nil
		})
		if err != nil {
			return nil, "", err
		}
	}
	release := func() {
		_, _ = c.store.UpdateNode(context.WithoutCancel(ctx), n.UUID, func(cur *storage.Node) (*storage.Event, error) {
			cur.Reservation = nil
			return nil, nil
		})
	}
	token := ""
	if in.WantToken {
		var err error
		if _, token, err = c.issueToken(ctx, n.UUID); err != nil {
			release()
			return nil, "", err
		}
	}
	if in.Data.Error != "" {
		msg := fmt.Sprintf("Ramdisk reported error: %s", in.Data.Error)
		updated, err := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
			cur.Reservation, cur.LastError = nil, &msg
			return nil, nil
		})
		return updated, token, err
	}
	c.runTask(ctx, n, "discover", discoveryTask(in))
	return n, token, nil
}

// InspectionNode is the node that in reports on, found as
// ContinueInspection finds it (httpapi sends the report to its owner).
func (c *Conductor) InspectionNode(ctx context.Context, in Inspection) (*storage.Node, error) {
	return c.inspectionNode(ctx, in)
}

func (c *Conductor) inspectionNode(ctx context.Context, in Inspection) (*storage.Node, error) {
	macs := inventoryMACs(in)
	var n *storage.Node
	if in.NodeUUID != "" {
		found, err := c.store.GetNode(ctx, in.NodeUUID)
		if err != nil {
			return nil, errAgentNotFound()
		}
		n = found
	}
	if len(macs) > 0 {
		byMAC, err := c.nodeByMACs(ctx, macs)
		switch {
		case err == nil && n != nil && byMAC.UUID != n.UUID:
			return nil, errAgentNotFound()
		case err == nil:
			n = byMAC
		case !fault.Is(err, fault.NotFound):
			return nil, err
		}
	}
	if n != nil && c.cfg.Discovery && discovered(n) {
		return n, nil
	}
	if n != nil && State(n.ProvisionState) != InspectWait {
		c.log.WarnContext(ctx, "inspection data for a node not in inspect wait", "node", n.UUID, "state", n.ProvisionState)
		return nil, errAgentNotFound()
	}
	if n != nil {
		return n, nil
	}
	// No port matched: try the BMC address, then the single portless node.
	st := string(InspectWait)
	waiting, err := c.store.ListNodes(ctx, storage.NodeQuery{ProvisionState: &st, IncludeChildren: true})
	if err != nil {
		return nil, err
	}
	for _, bmc := range []*string{in.Data.Inventory.BMCAddress, in.Data.Inventory.BMCV6Address} {
		if bmc == nil || *bmc == "" || *bmc == "0.0.0.0" || *bmc == "::/0" {
			continue
		}
		for _, w := range waiting {
			if bmcAddressOf(w) == *bmc {
				return w, nil
			}
		}
	}
	portless, err := c.portlessInspecting(ctx)
	if err != nil {
		return nil, err
	}
	var only []*storage.Node
	for _, p := range portless {
		if State(p.ProvisionState) == InspectWait {
			only = append(only, p)
		}
	}
	if len(only) == 1 {
		return c.store.GetNode(ctx, only[0].UUID)
	}
	if !c.cfg.Discovery {
		c.log.WarnContext(ctx, "inspection data matches no node", "macs", macs, "portless_waiting", len(only))
	}
	return nil, errNoMatch
}

// bmcAddressOf is the node's BMC host as enrolled.
func bmcAddressOf(n *storage.Node) string {
	for _, k := range []string{"ipmi_address", "redfish_address", "ilo_address", "bmc_address"} {
		if v, ok := n.DriverInfo[k].(string); ok && v != "" {
			v = strings.TrimPrefix(strings.TrimPrefix(v, "https://"), "http://")
			if h, _, ok := strings.Cut(v, "/"); ok {
				v = h
			}
			return v
		}
	}
	return ""
}

// applyInspection creates the ports, powers the node off, fills its
// properties, runs the inspection rules, stores the inventory and ends in
// manageable (inspect failed when a rule fails).
func applyInspection(in Inspection) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		inv := in.Data.Inventory
		created, err := c.portsFromInventory(ctx, n, inv, bootMAC(in.Data))
		if err != nil {
			return failed(fmt.Errorf("Failed to create ports from the inventory: %v", Word(err)))
		}
		if len(created) > 0 {
			c.log.InfoContext(ctx, "ports created by inspection", "node", n.UUID, "state", n.ProvisionState, "verb", "inspect", "macs", created)
		}
		c.cacheFirmwareOf(ctx, n) // Ironic: while the node is on, for NICs that need it
		if err := powerOffOrReboot(ctx, c, n); err != nil {
			c.log.WarnContext(ctx, "power off after inspection failed", "node", n.UUID, "state", n.ProvisionState, "err", err)
		}
		plugin, err := c.inspectedNode(ctx, n.UUID, in, c.inspectOverwrite(n))
		if err != nil {
			return outcome{ev: EvFail, err: fmt.Errorf("Failed to finish inspection: %v", err), mutate: finishInspection(c, false)}
		}
		return outcome{ev: EvDone, mutate: func(n *storage.Node) {
			finishInspection(c, !n.DisablePowerOff)(n)
			if n.DisablePowerOff {
				on := driver.PowerOn
				n.PowerState = &on // rebooted in place
			}
			n.DriverInternalInfo[InventoryKey] = map[string]any{"inventory": in.Inventory, "plugin_data": plugin}
		}}
	}
}

// inspectOverwrite: may inspection replace properties the operator set?
func (c *Conductor) inspectOverwrite(n *storage.Node) bool {
	if v, ok := n.DriverInfo["inspect_overwrite"].(bool); ok {
		return v
	}
	return c.cfg.InspectOverwrite
}

// finishInspection ends an inspection on the node: the agent is gone
// (powered off when off is true), the time noted.
func finishInspection(c *Conductor, off bool) func(n *storage.Node) {
	return func(n *storage.Node) {
		wipeToken(n)
		now := c.now()
		n.InspectionFinishedAt = &now
		if off {
			state := driver.PowerOff
			n.PowerState = &state
		}
	}
}

// bootMAC is the MAC of the NIC that booted the ramdisk.
func bootMAC(d protocol.InspectionData) string {
	for _, v := range []string{d.Inventory.Boot.PXEInterface, strings.TrimPrefix(d.BootInterface, "01-")} {
		if m, err := NormalizeMAC(strings.ReplaceAll(v, "-", ":")); err == nil {
			return m
		}
	}
	return ""
}

// portsFromInventory creates a port for every NIC whose MAC no port has yet;
// existing ports are kept as they are. pxe_enabled marks the booting NIC.
func (c *Conductor) portsFromInventory(ctx context.Context, n *storage.Node, inv protocol.Inventory, pxeMAC string) ([]string, error) {
	var macs []string
	for _, i := range inv.Interfaces {
		if mac, err := NormalizeMAC(i.MACAddress); err == nil {
			macs = append(macs, mac)
		}
	}
	return c.createPorts(ctx, n, macs, pxeMAC)
}

// createPorts creates a port for every (normalized) MAC no port has yet.
func (c *Conductor) createPorts(ctx context.Context, n *storage.Node, macs []string, pxeMAC string) ([]string, error) {
	var created []string
	for _, mac := range macs {
		if _, err := c.store.GetPortByAddress(ctx, mac); err == nil {
			continue
		} else if !fault.Is(err, fault.NotFound) {
			return created, err
		}
		p := &storage.Port{UUID: uuid.NewString(), NodeUUID: n.UUID, Address: mac, PXEEnabled: mac == pxeMAC, CreatedAt: c.now()}
		ensurePortMaps(p)
		if err := c.store.CreatePort(ctx, p); err != nil {
			if fault.Is(err, fault.Conflict) {
				continue // created meanwhile, e.g. by the operator
			}
			return created, err
		}
		created = append(created, mac)
	}
	return created, nil
}

// setInspectedProperties fills cpus, memory_mb, local_gb, cpu_arch and the
// boot_mode capability; a value the operator set stays unless overwrite.
func setInspectedProperties(n *storage.Node, inv protocol.Inventory, overwrite bool) {
	set := func(k string, v any) {
		if _, has := n.Properties[k]; !has || overwrite {
			n.Properties[k] = v
		}
	}
	if inv.CPU.Count > 0 {
		set("cpus", inv.CPU.Count)
	}
	if inv.CPU.Architecture != "" {
		set("cpu_arch", inv.CPU.Architecture)
	}
	if mb := memoryMB(inv.Memory); mb > 0 {
		set("memory_mb", mb)
	}
	hints, _ := n.Properties["root_device"].(map[string]any)
	if disk, err := rootDisk(inv.Disks, hints); err == nil {
		gb := disk.Size >> 30
		if gb > 0 {
			gb-- // Ironic leaves 1 GiB for the partition table and config drive
		}
		set("local_gb", gb)
	}
	setBootModeCapability(n, inv.Boot.CurrentBootMode, overwrite)
}

// setBootModeCapability records mode ("uefi" or "bios") as the boot_mode
// capability unless the node has one (and overwrite is false).
func setBootModeCapability(n *storage.Node, mode string, overwrite bool) {
	if mode != "uefi" && mode != "bios" {
		return
	}
	caps, _ := n.Properties["capabilities"].(string)
	if !strings.Contains(caps, "boot_mode:") {
		if caps != "" {
			caps += ","
		}
		n.Properties["capabilities"] = caps + "boot_mode:" + mode
	} else if overwrite {
		n.Properties["capabilities"] = replaceCapability(caps, "boot_mode", mode)
	}
}

func replaceCapability(caps, key, value string) string {
	parts := strings.Split(caps, ",")
	for i, p := range parts {
		if k, _, _ := strings.Cut(p, ":"); k == key {
			parts[i] = key + ":" + value
		}
	}
	return strings.Join(parts, ",")
}

func memoryMB(m protocol.Memory) int64 {
	if m.PhysicalMB > 0 {
		return m.PhysicalMB
	}
	return m.Total >> 20
}
