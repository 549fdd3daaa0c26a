package ipmi

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/bougou/go-ipmi/pkg/command/chassis"
)

// PowerState reads Get Chassis Status, on the BMC's kept session.
func (d *Driver) PowerState(ctx context.Context, n driver.Node) (string, error) {
	inf, err := parseInfo(n)
	if err != nil {
		return "", err
	}
	var state string
	err = d.withKept(ctx, inf, func(ctx context.Context, s *conn) error {
		state, err = s.powerState(ctx)
		return err
	})
	return state, err
}

// SetPowerState drives the node to target the way Ironic's ipmitool driver
// does and waits for it. timeout <= 0 means the configured default; for
// rebooting and soft rebooting it applies to each half (off, then on), as in
// Ironic.
func (d *Driver) SetPowerState(ctx context.Context, n driver.Node, target string, timeout time.Duration) error {
	if !slices.Contains(d.SupportedPowerStates(), target) {
		return fault.New(fault.Invalid, "set_power_state called with invalid power state %s.", target)
	}
	inf, err := parseInfo(n)
	if err != nil {
		return err
	}
	hard, soft := timeout, timeout
	if timeout <= 0 {
		hard, soft = d.cfg.PowerTimeout, d.cfg.SoftPowerOffTimeout
	}
	return d.session(ctx, inf, func(s *conn) error {
		switch target {
		case driver.PowerOn:
			return s.powerOn(ctx, n, hard)
		case driver.PowerOff:
			return s.setAndWait(ctx, chassis.ChassisControlPowerDown, driver.PowerOff, hard)
		case driver.SoftPowerOff:
			return s.setAndWait(ctx, chassis.ChassisControlSoftShutdown, driver.PowerOff, soft)
		case driver.Rebooting:
			if n.DisablePowerOff {
				return s.resetInPlace(ctx, n, hard)
			}
			// Ironic's reboot: off (unless already off), then on. Not
			// "power cycle", which some BMCs refuse when the node is off.
			if err := s.setAndWait(ctx, chassis.ChassisControlPowerDown, driver.PowerOff, hard); err != nil {
				return err
			}
			return s.powerOn(ctx, n, hard)
		default: // driver.SoftRebooting
			if n.DisablePowerOff {
				// IPMI has no graceful restart: a soft reboot is a soft
				// power off, which such a node must not have (Ironic's
				// UnsupportedHardwareFeature).
				return fault.New(fault.Invalid, "Node %s hardware does not support feature %s, which is required based upon the requested configuration.", n.UUID, driver.SoftPowerOff)
			}
			if err := s.setAndWait(ctx, chassis.ChassisControlSoftShutdown, driver.PowerOff, soft); err != nil {
				return err
			}
			return s.powerOn(ctx, n, hard)
		}
	})
}

// resetInPlace is the reboot of a node that must never be powered off
// (Ironic's ipmitool reboot with disable_power_off: "power reset"): a node
// that is on is reset, one that is off is powered on.
func (s *conn) resetInPlace(ctx context.Context, n driver.Node, timeout time.Duration) error {
	cur, err := s.powerState(ctx)
	if err != nil {
		return err
	}
	if cur != driver.PowerOn {
		return s.powerOn(ctx, n, timeout)
	}
	if dev, ok := forcedBootDevice(s.inf, n); ok {
		if err := s.setBootDevice(ctx, dev, false); err != nil {
			return err
		}
	}
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	if _, err := c.ChassisControl(ctx, chassis.ChassisControlHardReset); err != nil {
		return wrapBMC(ctx, s.inf, err, "IPMI chassis control %q failed", controlName(chassis.ChassisControlHardReset))
	}
	return s.waitPower(ctx, driver.PowerOn, timeout, controlName(chassis.ChassisControlHardReset))
}

// powerOn re-applies a remembered boot device when ipmi_force_boot_device
// asks for it, then powers on.
func (s *conn) powerOn(ctx context.Context, n driver.Node, timeout time.Duration) error {
	if dev, ok := forcedBootDevice(s.inf, n); ok {
		if err := s.setBootDevice(ctx, dev, false); err != nil {
			return err
		}
	}
	return s.setAndWait(ctx, chassis.ChassisControlPowerUp, driver.PowerOn, timeout)
}

// setAndWait sends one chassis control command unless the node is already in
// want (some BMCs answer an error to "off" when off), then polls until it is.
func (s *conn) setAndWait(ctx context.Context, cmd chassis.ChassisControl, want string, timeout time.Duration) error {
	cur, err := s.powerState(ctx)
	if err != nil {
		return err
	}
	if cur == want {
		return nil
	}
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	if _, err := c.ChassisControl(ctx, cmd); err != nil {
		return wrapBMC(ctx, s.inf, err, "IPMI chassis control %q failed", controlName(cmd))
	}
	return s.waitPower(ctx, want, timeout, controlName(cmd))
}

// waitPower polls the power state with backoff until it is want or timeout
// passes. A failed read (BMCs can be busy while the node changes state) drops
// the session and is retried until the deadline.
func (s *conn) waitPower(ctx context.Context, want string, timeout time.Duration, action string) error {
	return driver.PowerWait{
		Protocol: "IPMI", Node: s.inf.uuid, Action: action, Want: want, Timeout: timeout,
		Interval: s.d.cfg.PollInterval, MaxInterval: s.d.cfg.MaxPollInterval,
		Read:   s.powerState,
		Fatal:  func(err error) bool { return errors.Is(err, ErrAuthentication) }, // polling will not fix credentials
		Failed: func(error) { s.drop(ctx) },
	}.Run(ctx)
}

// powerState reads Get Chassis Status on the session.
func (s *conn) powerState(ctx context.Context) (string, error) {
	c, err := s.client(ctx)
	if err != nil {
		return "", err
	}
	st, err := c.GetChassisStatus(ctx)
	if err != nil {
		return "", wrapBMC(ctx, s.inf, err, "IPMI get chassis status failed")
	}
	if st.PowerIsOn {
		return driver.PowerOn, nil
	}
	return driver.PowerOff, nil
}

// controlName is ipmitool's word for a chassis control, for messages.
func controlName(c chassis.ChassisControl) string {
	switch c {
	case chassis.ChassisControlPowerDown:
		return "power off"
	case chassis.ChassisControlPowerUp:
		return "power on"
	case chassis.ChassisControlPowerCycle:
		return "power cycle"
	case chassis.ChassisControlHardReset:
		return "power reset"
	case chassis.ChassisControlSoftShutdown:
		return "power soft"
	}
	return fmt.Sprintf("chassis control %d", c)
}

// Health reads what IPMI's Get Chassis Status says of the hardware (Ironic's
// ipmitool has no get_node_health; this is castiron's reading of the fault
// bits): a power fault, power overload, power control fault or an active
// interlock is Critical; a cooling fan or drive fault, or an open chassis,
// is Warning; none of them is OK.
func (d *Driver) Health(ctx context.Context, n driver.Node) (string, error) {
	_, health, err := d.PowerStateHealth(ctx, n)
	return health, err
}

// PowerStateHealth reads the power state and the health from one Get
// Chassis Status on the BMC's kept session (power sync reads both).
func (d *Driver) PowerStateHealth(ctx context.Context, n driver.Node) (string, string, error) {
	inf, err := parseInfo(n)
	if err != nil {
		return "", "", err
	}
	var power, health string
	err = d.withKept(ctx, inf, func(ctx context.Context, s *conn) error {
		c, err := s.client(ctx)
		if err != nil {
			return err
		}
		st, err := c.GetChassisStatus(ctx)
		if err != nil {
			return wrapBMC(ctx, s.inf, err, "IPMI get chassis status failed")
		}
		power = driver.PowerOff
		if st.PowerIsOn {
			power = driver.PowerOn
		}
		health = chassisHealth(st)
		return nil
	})
	return power, health, err
}

// chassisHealth is castiron's reading of the chassis status fault bits.
func chassisHealth(st *chassis.GetChassisStatusResponse) string {
	switch {
	case st.PowerFault || st.PowerOverload || st.PowerControlFault || st.InterLock:
		return driver.HealthCritical
	case st.CollingFanFault || st.DriveFault || st.ChassisIntrusionActive:
		return driver.HealthWarning
	}
	return driver.HealthOK
}
