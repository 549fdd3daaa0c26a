package engine

import (
	"context"
	"fmt"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// resultingPower is the power state a power target ends in.
func resultingPower(target string) string {
	switch target {
	case driver.PowerOff, driver.SoftPowerOff:
		return driver.PowerOff
	}
	return driver.PowerOn
}

// SetPower starts a power change (PUT /states/power). It returns once
// target_power_state is recorded; the driver call runs in the background.
func (c *Conductor) SetPower(ctx context.Context, ident, target string, timeout time.Duration) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	supported := false
	for _, s := range hw.Power.SupportedPowerStates() {
		supported = supported || s == target
	}
	if resultingPower(target) == driver.PowerOff && n.DisablePowerOff {
		// Ironic's PowerStateFailure (InvalidState, 409), checked by its
		// API and again by node_power_action.
		return fault.New(fault.Conflict, "Failed to set node power state to %s.", target)
	}
	if !supported {
		return fault.New(fault.Invalid, "The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", target, n.UUID, powerStateWord(n))
	}
	if err := hw.Power.Validate(driverNode(n)); err != nil {
		return fault.Wrap(fault.Invalid, err, "Failed to validate power driver interface for node %s. Error: %v", n.UUID, err)
	}
	if timeout <= 0 {
		timeout = c.cfg.PowerTimeout
	}
	want := resultingPower(target)
	updated, err := c.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		n.Reservation = strp(c.cfg.Hostname)
		n.TargetPowerState = &want
		n.LastError = nil
		return c.powerEvent(ctx, n, target, "INFO", fmt.Sprintf("power change requested: %s", target)), nil
	})
	if err != nil {
		return err
	}
	c.spawn(ctx, func(ctx context.Context) {
		log := c.log.With("node", updated.UUID, "verb", target, "state", updated.ProvisionState)
		opErr := hw.Power.SetPowerState(ctx, driverNode(updated), target, timeout)
		if ctx.Err() != nil {
			log.WarnContext(ctx, "power change interrupted by shutdown")
			return
		}
		actual := want
		if opErr != nil {
			if ps, err := hw.Power.PowerState(ctx, driverNode(updated)); err == nil {
				actual = ps
			} else {
				actual = deref(updated.PowerState)
			}
		}
		_, err := c.store.UpdateNode(ctx, updated.UUID, func(n *storage.Node) (*storage.Event, error) {
			n.Reservation = nil
			n.TargetPowerState = nil
			if actual != "" {
				n.PowerState = strp(actual)
			}
			if opErr != nil {
				msg := fmt.Sprintf("Failed to change power state to '%s' by '%s'. Error: %v", want, target, opErr)
				n.LastError = &msg
				return c.powerEvent(ctx, n, target, "ERROR", msg), nil
			}
			return c.powerEvent(ctx, n, target, "INFO", fmt.Sprintf("power state is now %s", actual)), nil
		})
		if err != nil {
			log.ErrorContext(ctx, "could not record power change", "err", err)
			return
		}
		if opErr != nil {
			log.WarnContext(ctx, "power change failed", "err", opErr)
		} else {
			log.InfoContext(ctx, "power change done", "power_state", actual)
		}
	})
	return nil
}

func powerStateWord(n *storage.Node) string {
	if n.PowerState == nil {
		return "None"
	}
	return *n.PowerState
}

func (c *Conductor) powerEvent(ctx context.Context, n *storage.Node, verb, severity, msg string) *storage.Event {
	return &storage.Event{
		NodeUUID:  n.UUID,
		CreatedAt: c.now(),
		Conductor: c.cfg.Hostname,
		EventType: "power",
		Severity:  severity,
		Event:     msg,
		User:      actorOf(ctx),
		Project:   projectOf(ctx),
		Verb:      verb,
		FromState: n.ProvisionState,
		ToState:   n.ProvisionState,
	}
}

// syncHealth is Ironic's node health update during power sync (API 1.109):
// a management interface that reads health (driver.HealthReader) has it
// read; a change is stored with a "monitoring" history event. A driver
// without it, or a failed read, leaves health as it is.
func (c *Conductor) syncHealth(ctx context.Context, n *storage.Node, hw *HardwareType) error {
	hr, ok := managementFeature[driver.HealthReader](n, hw)
	if !ok {
		return nil
	}
	h, err := hr.Health(ctx, driverNode(n))
	if err != nil {
		c.log.WarnContext(ctx, "power sync: cannot read health", "node", n.UUID, "state", n.ProvisionState, "err", err)
		return nil
	}
	return c.recordHealth(ctx, n, h)
}

// recordHealth stores a health reading that differs from the node's, with
// a "monitoring" history event.
func (c *Conductor) recordHealth(ctx context.Context, n *storage.Node, h string) error {
	if h == deref(n.Health) {
		return nil
	}
	_, err := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		old := deref(cur.Health)
		if old == h {
			return nil, nil
		}
		cur.Health = nil
		if h != "" {
			cur.Health = strp(h)
		}
		return &storage.Event{NodeUUID: cur.UUID, CreatedAt: c.now(), Conductor: c.cfg.Hostname,
			EventType: "monitoring", Severity: "INFO", User: "conductor", Verb: "power-sync",
			Event:     fmt.Sprintf("Node health status changed: health='%s' (previously '%s')", pyNone(h), pyNone(old)),
			FromState: cur.ProvisionState, ToState: cur.ProvisionState}, nil
	})
	if err == nil && (h == driver.HealthWarning || h == driver.HealthCritical) {
		c.log.WarnContext(ctx, "node health status indicates a problem", "node", n.UUID, "state", n.ProvisionState, "health", h)
	}
	return err
}

// pyNone is s, or "None" (Python's str(None)) when empty.
func pyNone(s string) string {
	if s == "" {
		return "None"
	}
	return s
}

func boolp(b bool) *bool { return &b }

// SetBootDevice sets the boot device now (Ironic does this synchronously).
func (c *Conductor) SetBootDevice(ctx context.Context, ident, device string, persistent bool) error {
	n, hw, err := c.idleNode(ctx, ident)
	if err != nil {
		return err
	}
	ok := false
	for _, d := range hw.Management.SupportedBootDevices() {
		ok = ok || d == device
	}
	if !ok {
		return fault.New(fault.Invalid, "Invalid boot device %s specified.", device)
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return err
	}
	if err := hw.Management.SetBootDevice(ctx, driverNode(n), device, persistent); err != nil {
		return fault.Wrap(fault.Internal, err, "Failed to set boot device for node %s: %v", n.UUID, err)
	}
	c.log.InfoContext(ctx, "boot device set", "node", n.UUID, "state", n.ProvisionState, "verb", "boot_device", "device", device, "persistent", persistent)
	return nil
}

// BootDevice reads the boot device from the BMC.
func (c *Conductor) BootDevice(ctx context.Context, ident string) (driver.BootDevice, error) {
	n, hw, err := c.idleNode(ctx, ident)
	if err != nil {
		return driver.BootDevice{}, err
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return driver.BootDevice{}, err
	}
	bd, err := hw.Management.BootDevice(ctx, driverNode(n))
	if err != nil {
		return bd, fault.Wrap(fault.Internal, err, "Failed to get boot device for node %s: %v", n.UUID, err)
	}
	return bd, nil
}

// SupportedBootDevices lists the node's management interface's devices.
func (c *Conductor) SupportedBootDevices(ctx context.Context, ident string) ([]string, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, err
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return nil, err
	}
	return hw.Management.SupportedBootDevices(), nil
}

// idleNode loads a node that no task holds (Ironic takes an exclusive lock
// for management calls).
func (c *Conductor) idleNode(ctx context.Context, ident string) (*storage.Node, *HardwareType, error) {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return nil, nil, err
	}
	if n.Reservation != nil {
		return nil, nil, fault.Locked(n.UUID, *n.Reservation)
	}
	hw, err := c.hardwareOf(n)
	return n, hw, err
}
