package engine

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// interfaceKinds are the per-node hardware interfaces, in Ironic's order.
var interfaceKinds = []string{
	"bios", "boot", "console", "deploy", "firmware", "inspect", "management",
	"network", "power", "raid", "rescue", "storage", "vendor",
}

// HardwareType is a named set of interface implementations, as Ironic's
// hardware types: which implementations a node may pick per kind, and the
// default for each kind (the first of its list).
type HardwareType struct {
	Name       string
	Interfaces map[string][]string // kind -> enabled implementations, default first
	Power      driver.Power
	Management driver.Management
	// Inspector runs the out-of-band inspect interfaces (outOfBand); nil
	// for types that have none.
	Inspector driver.Inspector
	// BIOS holds the bios interface implementations that talk to a BMC, by
	// name ("redfish", "idrac-redfish"); the others (no-bios, fake) have
	// no steps.
	BIOS       map[string]driver.BIOS
	Properties []driver.Property // driver_info keys, for /drivers/{name}/properties
	// Serial, when set, is the serial console of the type's ipmitool-*
	// console interfaces; otherwise the management driver's, if it has one.
	Serial driver.SerialConsole
	// Consoles are serial consoles by console interface name, ahead of
	// Serial (redfish-ssh: WithSerialConsoles).
	Consoles map[string]driver.SerialConsole

	// Firmware and RAID hold the firmware and raid interface
	// implementations that talk to a BMC, by name ("redfish",
	// "idrac-redfish"); the others (no-*, fake, agent) have no BMC side.
	Firmware map[string]driver.Firmware
	RAID     map[string]driver.RAID
}

// FirmwareOf returns the node's firmware interface, if it talks to a BMC.
func (h *HardwareType) FirmwareOf(n *storage.Node) (driver.Firmware, bool) {
	f, ok := h.Firmware[n.FirmwareInterface]
	return f, ok && f != nil
}

// RAIDOf returns the node's raid interface, if it is a BMC's hardware RAID.
func (h *HardwareType) RAIDOf(n *storage.Node) (driver.RAID, bool) {
	r, ok := h.RAID[n.RAIDInterface]
	return r, ok && r != nil
}

// BIOSOf returns the node's bios interface, if it is one that talks to a
// BMC.
func (h *HardwareType) BIOSOf(n *storage.Node) (driver.BIOS, bool) {
	b, ok := h.BIOS[n.BIOSInterface]
	return b, ok && b != nil
}

// Default returns the default implementation of kind.
func (h *HardwareType) Default(kind string) string { return h.Interfaces[kind][0] }

// Enabled reports whether impl is an enabled implementation of kind.
func (h *HardwareType) Enabled(kind, impl string) bool {
	for _, i := range h.Interfaces[kind] {
		if i == impl {
			return true
		}
	}
	return false
}

// interfaceProperties are the driver_info keys an interface implementation
// reads, by "kind:implementation". A hardware type's properties (GET
// /v1/drivers/{name}/properties) are its own keys plus those of its
// default interfaces, as Ironic's get_properties.
var interfaceProperties = map[string][]driver.Property{
	"inspect:agent": {
		{Name: "inspect_wait_timeout", Description: "Seconds to wait for the ramdisk's inspection data before the node goes to inspect failed; default is the conductor's callback timeout. Optional."},
		{Name: "inspect_overwrite", Description: "Whether inspection overwrites properties that are already set (cpus, memory_mb, local_gb, cpu_arch); default is the conductor's setting. Optional."},
	},
	// Ironic's fake vendor interface (FakeVendorB) documents two made-up
	// keys; clients and tempest expect fake-hardware to list them.
	"vendor:fake": {
		{Name: "B1", Description: "B1 description. Required."},
		{Name: "B2", Description: "B2 description. Required."},
	},
}

// DriverProperties are the driver_info keys the type documents: its own
// and those of its default interfaces.
func (h *HardwareType) DriverProperties() map[string]string {
	out := map[string]string{}
	for _, p := range h.Properties {
		out[p.Name] = p.Description
	}
	for _, kind := range interfaceKinds {
		if len(h.Interfaces[kind]) == 0 {
			continue
		}
		for _, p := range interfaceProperties[kind+":"+h.Default(kind)] {
			out[p.Name] = p.Description
		}
	}
	return out
}

// Interfaces that need the ramdisk agent: a node using one of these waits in
// a *wait state for the agent's callback.
var agentDriven = map[string]bool{
	"deploy:direct": true, "deploy:ramdisk": true, "deploy:custom-agent": true,
	"inspect:agent": true, "rescue:agent": true,
}

// Inspect interfaces that read the hardware from the BMC: the node does not
// boot, inspection ends in the same task.
var outOfBand = map[string]bool{"inspect:redfish": true, "inspect:idrac-redfish": true, "inspect:ilo": true}

// NewFakeHardware is the fake-hardware type: instant power, boot, inspect and
// deploy; agent-driven interfaces may be chosen to exercise the wait states.
func NewFakeHardware(d interface {
	driver.Power
	driver.Management
}) *HardwareType {
	return &HardwareType{
		Name: "fake-hardware",
		Interfaces: map[string][]string{
			"bios":       {"fake", "no-bios"},
			"boot":       {"fake", "ipxe", "pxe", "http"},
			"console":    {"fake", "no-console"},
			"deploy":     {"fake", "direct", "ramdisk", "custom-agent"},
			"firmware":   {"fake", "no-firmware"},
			"inspect":    {"fake", "agent", "no-inspect"},
			"management": {"fake"},
			"network":    {"noop", "flat"},
			"power":      {"fake"},
			"raid":       {"fake", "agent", "no-raid"},
			"rescue":     {"fake", "agent", "no-rescue"},
			"storage":    {"noop", "fake"},
			"vendor":     {"fake", "no-vendor"},
		},
		Power:      d,
		Management: d,
	}
}

// NewIPMIHardware is the ipmi type; its power/management/vendor interfaces
// keep Ironic's name "ipmitool" although castiron speaks IPMI natively.
func NewIPMIHardware(p driver.Power, m driver.Management, props []driver.Property) *HardwareType {
	return &HardwareType{
		Name: "ipmi",
		Interfaces: map[string][]string{
			"bios":       {"no-bios"},
			"boot":       {"ipxe", "pxe", "http"},
			"console":    {"no-console", ConsoleSocat, ConsoleShellinabox},
			"deploy":     {"direct", "ramdisk", "custom-agent"},
			"firmware":   {"no-firmware"},
			"inspect":    {"agent", "no-inspect"},
			"management": {"ipmitool"},
			"network":    {"noop", "flat"},
			"power":      {"ipmitool"},
			"raid":       {"no-raid", "agent"},
			"rescue":     {"no-rescue", "agent"},
			"storage":    {"noop"},
			"vendor":     {"ipmitool", "no-vendor"},
		},
		Power:      p,
		Management: m,
		Properties: props,
	}
}

// RedfishDriver is what the redfish hardware type is made of: power,
// management (with its optional features) and out-of-band inspection.
type RedfishDriver interface {
	driver.Power
	driver.Management
	driver.Inspector
}

// NewRedfishHardware is the redfish type, with Ironic's interface names:
// power, management and inspect "redfish"; boot by iPXE/PXE as the other
// types, by virtual media (redfish-virtual-media) or by UEFI HTTP boot of
// the ramdisk ISO (redfish-https).
func NewRedfishHardware(d RedfishDriver, props []driver.Property) *HardwareType {
	hw := &HardwareType{
		Name: "redfish",
		Interfaces: map[string][]string{
			"bios":       {"no-bios"},
			"boot":       {"ipxe", "pxe", "http", BootVirtualMedia, BootRedfishHTTPS},
			"console":    {"no-console", ConsoleSocat, ConsoleShellinabox},
			"deploy":     {"direct", "ramdisk", "custom-agent"},
			"firmware":   {"no-firmware"},
			"inspect":    {"redfish", "agent", "no-inspect"},
			"management": {"redfish"},
			"network":    {"noop", "flat"},
			"power":      {"redfish"},
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
	if b, ok := d.(BIOSProvider); ok {
		WithBIOS(hw, "redfish", b.BIOSInterface("redfish"))
	}
	WithRedfishFirmwareRAID(hw, d, "redfish")
	return hw
}

// WithRedfishFirmwareRAID gives hw the Redfish firmware ("redfish") and
// hardware RAID (raidName) code of d, when d has it, as the defaults
// (Ironic's redfish type lists them first). The idrac type uses it with
// raid "idrac-redfish": the same code, its volumes built through the same
// Storage resources (iDRAC answers with tasks, which the code waits for).
func WithRedfishFirmwareRAID(hw *HardwareType, d any, raidName string) *HardwareType {
	if f, ok := d.(driver.Firmware); ok {
		hw.Firmware = map[string]driver.Firmware{"redfish": f}
		hw.Interfaces["firmware"] = append([]string{"redfish"}, slices.DeleteFunc(slices.Clone(hw.Interfaces["firmware"]), func(s string) bool { return s == "redfish" })...)
	}
	if r, ok := d.(driver.RAID); ok {
		hw.RAID = map[string]driver.RAID{raidName: r}
		hw.Interfaces["raid"] = append([]string{raidName}, slices.DeleteFunc(slices.Clone(hw.Interfaces["raid"]), func(s string) bool { return s == raidName })...)
	}
	return hw
}

// BIOSProvider is a driver with bios interfaces by name (the redfish
// driver: "redfish", "idrac-redfish").
type BIOSProvider interface {
	BIOSInterface(name string) driver.BIOS
}

// WithBIOS makes b the hardware type's bios interface name, its default
// (Ironic's redfish and idrac types list their BIOS interface first, then
// no-bios). The idrac type uses it with "idrac-redfish".
func WithBIOS(hw *HardwareType, name string, b driver.BIOS) *HardwareType {
	if b == nil {
		return hw
	}
	if hw.BIOS == nil {
		hw.BIOS = map[string]driver.BIOS{}
	}
	hw.BIOS[name] = b
	hw.Interfaces["bios"] = append([]string{name}, slices.DeleteFunc(slices.Clone(hw.Interfaces["bios"]), func(s string) bool { return s == name })...)
	return hw
}

// NewManualManagement is the manual-management type: no power or boot
// control; the operator does it by hand.
func NewManualManagement(d interface {
	driver.Power
	driver.Management
}) *HardwareType {
	return &HardwareType{
		Name: "manual-management",
		Interfaces: map[string][]string{
			"bios":       {"no-bios"},
			"boot":       {"ipxe", "pxe", "http"},
			"console":    {"no-console"},
			"deploy":     {"direct", "ramdisk", "custom-agent"},
			"firmware":   {"no-firmware"},
			"inspect":    {"agent", "no-inspect"},
			"management": {"noop"},
			"network":    {"noop", "flat"},
			"power":      {"fake"},
			"raid":       {"no-raid", "agent"},
			"rescue":     {"no-rescue", "agent"},
			"storage":    {"noop"},
			"vendor":     {"no-vendor"},
		},
		Power:      d,
		Management: d,
	}
}

// Registry holds the enabled hardware types by name.
type Registry struct {
	types map[string]*HardwareType
}

// NewRegistry indexes the given hardware types.
func NewRegistry(types ...*HardwareType) *Registry {
	r := &Registry{types: map[string]*HardwareType{}}
	for _, t := range types {
		r.types[t.Name] = t
	}
	return r
}

// Get returns a hardware type by name.
func (r *Registry) Get(name string) (*HardwareType, bool) {
	t, ok := r.types[name]
	return t, ok
}

// Names lists the enabled hardware types, sorted.
func (r *Registry) Names() []string {
	out := make([]string, 0, len(r.types))
	for n := range r.types {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// InterfaceField returns a pointer to the node's field for kind.
func InterfaceField(n *storage.Node, kind string) *string {
	switch kind {
	case "bios":
		return &n.BIOSInterface
	case "boot":
		return &n.BootInterface
	case "console":
		return &n.ConsoleInterface
	case "deploy":
		return &n.DeployInterface
	case "firmware":
		return &n.FirmwareInterface
	case "inspect":
		return &n.InspectInterface
	case "management":
		return &n.ManagementInterface
	case "network":
		return &n.NetworkInterface
	case "power":
		return &n.PowerInterface
	case "raid":
		return &n.RAIDInterface
	case "rescue":
		return &n.RescueInterface
	case "storage":
		return &n.StorageInterface
	case "vendor":
		return &n.VendorInterface
	}
	panic("unknown interface kind " + kind)
}

// InterfaceOf returns the node's implementation of kind.
func InterfaceOf(n *storage.Node, kind string) string { return *InterfaceField(n, kind) }

// fillInterfaces sets every empty interface of n to the hardware type's
// default and checks every set one is enabled (Ironic's messages).
func fillInterfaces(n *storage.Node, hw *HardwareType, reset bool) error {
	for _, kind := range interfaceKinds {
		f := InterfaceField(n, kind)
		if *f == "" || reset {
			*f = hw.Default(kind)
			continue
		}
		if !hw.Enabled(kind, *f) {
			return fault.New(fault.Invalid,
				"Could not find the following interface in the 'ironic.hardware.interfaces.%s' entrypoint: %s. Valid interfaces are %s.",
				kind, *f, strings.Join(hw.Interfaces[kind], ", "))
		}
	}
	return nil
}

// needsAgent reports whether the node's kind interface waits for the ramdisk.
func needsAgent(n *storage.Node, kind string) bool {
	return agentDriven[kind+":"+InterfaceOf(n, kind)]
}

func unknownDriver(name, group string) error {
	return fault.New(fault.Invalid, "No valid host was found. Reason: No conductor service registered which supports driver %s for conductor group %q.", name, group)
}

// describe is a short "driver/interface" string for logs.
func describe(n *storage.Node) string {
	return fmt.Sprintf("%s(power=%s,deploy=%s,inspect=%s)", n.Driver, n.PowerInterface, n.DeployInterface, n.InspectInterface)
}

// InterfaceKinds lists the per-node hardware interfaces, in Ironic's order.
func InterfaceKinds() []string { return slices.Clone(interfaceKinds) }
