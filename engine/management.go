package engine

import (
	"context"
	"fmt"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// unstableStates are Ironic's states.UNSTABLE_STATES: states a node leaves
// without an external request. Boot mode and secure boot are not changed in
// them.
var unstableStates = map[State]bool{
	Deploying: true, DeployWait: true, Cleaning: true, CleanWait: true, Verifying: true,
	Deleting: true, Inspecting: true, InspectWait: true, Adopting: true, Rescuing: true,
	RescueWait: true, Unrescuing: true, Servicing: true, ServiceWait: true,
}

// unsupportedExtension is Ironic's UnsupportedDriverExtension (HTTP 400).
func unsupportedExtension(driverName, extension string) error {
	return fault.New(fault.Invalid, "Driver %s does not support %s (disabled or not implemented).", driverName, extension)
}

// managementFeature returns the node's management implementation as T when
// it offers that optional feature. The "noop" management interface (the
// manual-management hardware type) offers none, as in Ironic.
func managementFeature[T any](n *storage.Node, hw *HardwareType) (T, bool) {
	var zero T
	if InterfaceOf(n, "management") == "noop" {
		return zero, false
	}
	f, ok := unwrapManagement(hw.Management).(T)
	return f, ok
}

// InjectNMI injects a non-maskable interrupt now (PUT
// /v1/nodes/{id}/management/inject_nmi), synchronously as Ironic's conductor
// does: the node must not be locked, the management interface must validate,
// and the driver must implement it.
func (c *Conductor) InjectNMI(ctx context.Context, ident string) error {
	n, hw, err := c.idleNode(ctx, ident)
	if err != nil {
		return err
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return err
	}
	nmi, ok := managementFeature[driver.NMIInjector](n, hw)
	if !ok {
		return unsupportedExtension(n.Driver, "inject_nmi")
	}
	if err := nmi.InjectNMI(ctx, driverNode(n)); err != nil {
		if fault.KindOf(err) != fault.Internal {
			return err
		}
		return fault.Wrap(fault.Internal, err, "Failed to inject NMI for node %s: %v", n.UUID, err)
	}
	c.log.InfoContext(ctx, "NMI injected", "node", n.UUID, "state", n.ProvisionState, "verb", "inject_nmi")
	return nil
}

// SetBootMode starts a boot mode change (PUT /v1/nodes/{id}/states/boot_mode,
// API 1.76); mode is "uefi" or "bios", checked by the caller. It returns once
// the node is reserved; the driver call runs in the background and, as in
// Ironic's node_change_boot_mode, either records node.boot_mode or leaves
// last_error.
func (c *Conductor) SetBootMode(ctx context.Context, ident, mode string) error {
	return c.changeBootSetting(ctx, ident, "changing node boot mode",
		func(n *storage.Node, hw *HardwareType) (string, func(context.Context) error) {
			set, ok := managementFeature[driver.BootModeSetter](n, hw)
			return fmt.Sprintf("Failed to change boot mode to '%s", mode), // sic: Ironic's message
				func(ctx context.Context) error {
					if !ok {
						return unsupportedExtension(n.Driver, "set_boot_mode")
					}
					return set.SetBootMode(ctx, driverNode(n), mode)
				}
		},
		func(n *storage.Node) { n.BootMode = strp(mode) })
}

// SetSecureBoot starts a secure boot change (PUT
// /v1/nodes/{id}/states/secure_boot, API 1.76), as SetBootMode.
func (c *Conductor) SetSecureBoot(ctx context.Context, ident string, on bool) error {
	word := "False"
	if on {
		word = "True"
	}
	return c.changeBootSetting(ctx, ident, "changing node secure boot",
		func(n *storage.Node, hw *HardwareType) (string, func(context.Context) error) {
			set, ok := managementFeature[driver.SecureBootSetter](n, hw)
			return fmt.Sprintf("Failed to change secure_boot state to '%s'", word),
				func(ctx context.Context) error {
					if !ok {
						return unsupportedExtension(n.Driver, "set_secure_boot_state")
					}
					return set.SetSecureBoot(ctx, driverNode(n), on)
				}
		},
		func(n *storage.Node) { n.SecureBoot = &on })
}

// changeBootSetting is the shared body of SetBootMode and SetSecureBoot:
// Ironic's change_node_boot_mode / change_node_secure_boot (unstable state
// 409, exclusive lock, management validate, last_error cleared) and then, in
// the background, the driver call.
func (c *Conductor) changeBootSetting(ctx context.Context, ident, purpose string,
	prepare func(*storage.Node, *HardwareType) (string, func(context.Context) error),
	record func(*storage.Node)) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	if unstableStates[State(n.ProvisionState)] {
		// Ironic passes this text to exception.Conflict as the message, so it
		// is never formatted: "%(state)s" reaches the client as is.
		return fault.New(fault.Conflict, "%s", "Node is in %(state)s state. Since node is transitioning, the boot mode will not be set as this may interfere with ongoing changes and result in erroneous modification. Try again later.")
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	if n.Reservation != nil {
		return fault.Locked(n.UUID, *n.Reservation)
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return err
	}
	updated, err := c.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		n.Reservation = strp(c.cfg.Hostname)
		n.LastError = nil
		return nil, nil
	})
	if err != nil {
		return err
	}
	failure, call := prepare(updated, hw)
	c.spawn(ctx, func(ctx context.Context) {
		log := c.log.With("node", updated.UUID, "verb", purpose, "state", updated.ProvisionState)
		opErr := call(ctx)
		_, err := c.store.UpdateNode(context.WithoutCancel(ctx), updated.UUID, func(n *storage.Node) (*storage.Event, error) {
			n.Reservation = nil
			if opErr != nil {
				msg := fmt.Sprintf("%s: %v", failure, opErr)
				n.LastError = &msg
				return nil, nil
			}
			record(n)
			return nil, nil
		})
		switch {
		case err != nil:
			log.ErrorContext(ctx, "could not record the result", "err", err)
		case opErr != nil:
			log.WarnContext(ctx, "failed", "err", opErr)
		default:
			log.InfoContext(ctx, "done")
		}
	})
	return nil
}

// SupportedIndicators lists the node's indicators (GET
// /v1/nodes/{id}/management/indicators). Ironic takes an exclusive lock and
// validates the management interface first.
func (c *Conductor) SupportedIndicators(ctx context.Context, ident string) (*storage.Node, []driver.Indicator, error) {
	n, hw, err := c.idleNode(ctx, ident)
	if err != nil {
		return nil, nil, err
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return nil, nil, err
	}
	ir, ok := managementFeature[driver.IndicatorReader](n, hw)
	if !ok {
		return nil, nil, unsupportedExtension(n.Driver, "get_supported_indicators")
	}
	inds, err := ir.SupportedIndicators(ctx, driverNode(n))
	return n, inds, err
}

// IndicatorState reads one indicator of a component.
func (c *Conductor) IndicatorState(ctx context.Context, ident, component, name string) (string, error) {
	n, hw, err := c.idleNode(ctx, ident)
	if err != nil {
		return "", err
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return "", err
	}
	ir, ok := managementFeature[driver.IndicatorReader](n, hw)
	if !ok {
		return "", unsupportedExtension(n.Driver, "get_indicator_state")
	}
	return ir.IndicatorState(ctx, driverNode(n), component, name)
}

// SetIndicatorState sets one indicator of a component, synchronously.
func (c *Conductor) SetIndicatorState(ctx context.Context, ident, component, name, state string) error {
	n, hw, err := c.idleNode(ctx, ident)
	if err != nil {
		return err
	}
	if err := hw.Management.Validate(driverNode(n)); err != nil {
		return err
	}
	is, ok := managementFeature[driver.IndicatorSetter](n, hw)
	if !ok {
		return unsupportedExtension(n.Driver, "set_indicator_state")
	}
	if err := is.SetIndicatorState(ctx, driverNode(n), component, name, state); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "indicator set", "node", n.UUID, "state", n.ProvisionState, "verb", "set_indicator_state", "indicator", name+"@"+component, "to", state)
	return nil
}
