// Package fake is the fake-hardware power and management driver: every
// operation succeeds at once, for tests and demos, as Ironic's fake interfaces.
package fake

import (
	"context"
	"sync"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
)

// Driver implements driver.Power and driver.Management without hardware.
// It remembers boot devices in memory; power state is the node's own.
type Driver struct {
	mu   sync.Mutex
	boot map[string]driver.BootDevice
}

// New returns a fake driver.
func New() *Driver { return &Driver{boot: map[string]driver.BootDevice{}} }

var (
	_ driver.Power      = (*Driver)(nil)
	_ driver.Management = (*Driver)(nil)
)

// Validate accepts any driver_info.
func (d *Driver) Validate(driver.Node) error { return nil }

// Verify always succeeds.
func (d *Driver) Verify(ctx context.Context, n driver.Node) error { return ctx.Err() }

// PowerState returns the recorded state, as Ironic's fake get_power_state
// returns node.power_state: "" (null) for a node never powered.
func (d *Driver) PowerState(ctx context.Context, n driver.Node) (string, error) {
	switch n.PowerState {
	case driver.PowerOn, driver.PowerOff, "":
		return n.PowerState, ctx.Err()
	}
	return driver.PowerOff, ctx.Err()
}

// SetPowerState accepts every supported target.
func (d *Driver) SetPowerState(ctx context.Context, n driver.Node, target string, _ time.Duration) error {
	for _, s := range d.SupportedPowerStates() {
		if s == target {
			return ctx.Err()
		}
	}
	return fault.New(fault.Invalid, "The fake power interface does not support power state %q.", target)
}

// SupportedPowerStates lists every state Ironic knows.
func (d *Driver) SupportedPowerStates() []string {
	return []string{driver.PowerOn, driver.PowerOff, driver.Rebooting, driver.SoftPowerOff, driver.SoftRebooting}
}

// SetBootDevice records the device.
func (d *Driver) SetBootDevice(ctx context.Context, n driver.Node, device string, persistent bool) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.boot[n.UUID] = driver.BootDevice{BootDevice: device, Persistent: &persistent}
	return ctx.Err()
}

// BootDevice returns the recorded device; before the first set, what
// Ironic's fake management always answers: pxe, not persistent.
func (d *Driver) BootDevice(ctx context.Context, n driver.Node) (driver.BootDevice, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if b, ok := d.boot[n.UUID]; ok {
		return b, ctx.Err()
	}
	persistent := false
	return driver.BootDevice{BootDevice: driver.BootPXE, Persistent: &persistent}, ctx.Err()
}

// SupportedBootDevices are those of Ironic's fake management interface.
func (d *Driver) SupportedBootDevices() []string {
	return []string{driver.BootPXE, driver.BootDisk}
}
