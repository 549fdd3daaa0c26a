// Package driver defines the small interfaces a hardware type is made of.
// Implementations live in subpackages (fake, ipmi); engine composes them into
// hardware types and is the only caller.
package driver

import (
	"context"
	"time"
)

// Power states on the wire, as Ironic spells them.
const (
	PowerOn         = "power on"
	PowerOff        = "power off"
	Rebooting       = "rebooting"
	SoftPowerOff    = "soft power off"
	SoftRebooting   = "soft rebooting"
	PowerStateError = "error"
)

// Boot devices, as Ironic spells them.
const (
	BootPXE   = "pxe"
	BootDisk  = "disk"
	BootCDROM = "cdrom"
	BootBIOS  = "bios"
	BootSafe  = "safe"
	// BootUEFIHTTP is UEFI HTTP boot (Redfish target UefiHttp).
	BootUEFIHTTP = "uefi-http"
)

// Node is what a driver may know of a node: who it is and how to reach it.
type Node struct {
	UUID         string
	DriverInfo   map[string]any
	InternalInfo map[string]any
	Properties   map[string]any
	BootMode     string // "uefi", "bios" or "" (unknown)
	// PowerState is the last power state the conductor recorded; the fake
	// driver answers with it, as Ironic's fake power interface does.
	PowerState string
	// DisablePowerOff (the node's disable_power_off): Rebooting must not
	// pass through power off; drivers reset the node in place (IPMI power
	// reset, Redfish ForceRestart), as Ironic's do for such nodes.
	DisablePowerOff bool
}

// BootDevice is the current boot device as a BMC reports it.
type BootDevice struct {
	BootDevice string `json:"boot_device"`
	Persistent *bool  `json:"persistent"`
}

// Power controls a node's power.
type Power interface {
	// Validate checks driver_info without touching the hardware; it returns a
	// fault.Invalid error naming what is missing or wrong.
	Validate(n Node) error
	// Verify talks to the BMC to prove the credentials work (manage verb).
	Verify(ctx context.Context, n Node) error
	// PowerState reads the current power state (PowerOn or PowerOff).
	PowerState(ctx context.Context, n Node) (string, error)
	// SetPowerState drives the node to target (PowerOn, PowerOff, Rebooting,
	// SoftPowerOff, SoftRebooting) and waits up to timeout for it to get there.
	SetPowerState(ctx context.Context, n Node, target string, timeout time.Duration) error
	// SupportedPowerStates lists the targets SetPowerState accepts.
	SupportedPowerStates() []string
}

// Management controls the boot device.
type Management interface {
	Validate(n Node) error
	SetBootDevice(ctx context.Context, n Node, device string, persistent bool) error
	BootDevice(ctx context.Context, n Node) (BootDevice, error)
	SupportedBootDevices() []string
}

// Property documents one driver_info key (GET /v1/drivers/{name}/properties).
type Property struct {
	Name        string
	Description string
}

// SessionKeeper is implemented by drivers that keep BMC sessions open
// between calls (ipmi). The conductor closes what it no longer uses.
type SessionKeeper interface {
	// CloseIdleSessions closes sessions unused for longer than idle.
	CloseIdleSessions(ctx context.Context, idle time.Duration)
	// CloseSessions closes every kept session.
	CloseSessions(ctx context.Context)
}

// BMCAddresser is implemented by drivers that can name the BMC a node's
// calls go to ("host:port"), so the conductor can bound its calls per BMC.
// An empty answer means unknown (driver_info invalid).
type BMCAddresser interface {
	BMCAddress(n Node) string
}
