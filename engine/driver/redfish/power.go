package redfish

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/stmcginnis/gofish/schemas"
)

// powerState maps Redfish PowerState as Ironic's GET_POWER_STATE_MAP does:
// a node powering on counts as on, one powering off as off.
func powerState(s schemas.PowerState) string {
	switch s {
	case schemas.OnPowerState, schemas.PoweringOnPowerState:
		return driver.PowerOn
	case schemas.OffPowerState, schemas.PoweringOffPowerState:
		return driver.PowerOff
	}
	return driver.PowerStateError
}

// PowerState reads the system's PowerState.
func (d *Driver) PowerState(ctx context.Context, n driver.Node) (string, error) {
	_, sys, err := d.open(ctx, n)
	if err != nil {
		return "", err
	}
	return powerState(sys.PowerState), nil
}

// SetPowerState drives the node to target the way Ironic's redfish driver
// does and waits for it: on = On (ForceOn where On is not offered), off =
// ForceOff, soft power off = GracefulShutdown, rebooting = ForceOff, wait,
// On (Ironic's reboot), soft rebooting = GracefulRestart. timeout <= 0 means
// the configured default, for each half of a reboot.
func (d *Driver) SetPowerState(ctx context.Context, n driver.Node, target string, timeout time.Duration) error {
	if !slices.Contains(d.SupportedPowerStates(), target) {
		return fault.New(fault.Invalid, "set_power_state called with invalid power state %s.", target)
	}
	o, err := d.begin(ctx, n)
	if err != nil {
		return err
	}
	if target == driver.Rebooting && n.DisablePowerOff {
		return o.restartInPlace(timeout)
	}
	return o.setPower(target, timeout, timeout)
}

// restartInPlace is the reboot of a node that must never be powered off
// (Ironic's redfish reboot with disable_power_off): ForceRestart when it is
// on, On when it is off.
func (o *op) restartInPlace(timeout time.Duration) error {
	if timeout <= 0 {
		timeout = o.d.cfg.PowerTimeout
	}
	sys, err := o.system()
	if err != nil {
		return err
	}
	if powerState(sys.PowerState) != driver.PowerOn {
		return o.setAndWait(sys, driver.PowerOn, timeout, schemas.OnResetType, schemas.ForceOnResetType)
	}
	rt, err := o.pickReset(sys, schemas.ForceRestartResetType)
	if err != nil {
		return err
	}
	if err := o.reset(sys, rt); err != nil {
		return err
	}
	return o.waitPower(driver.PowerOn, timeout, string(rt))
}

// setPower drives the node to target within the operation; hard bounds
// each wait for a hard change, soft the soft ones (<= 0: the defaults).
func (o *op) setPower(target string, hard, soft time.Duration) error {
	if hard <= 0 {
		hard = o.d.cfg.PowerTimeout
	}
	if soft <= 0 {
		soft = o.d.cfg.SoftPowerOffTimeout
	}
	sys, err := o.system()
	if err != nil {
		return err
	}
	switch target {
	case driver.PowerOn:
		return o.setAndWait(sys, driver.PowerOn, hard, schemas.OnResetType, schemas.ForceOnResetType)
	case driver.PowerOff:
		return o.setAndWait(sys, driver.PowerOff, hard, schemas.ForceOffResetType)
	case driver.SoftPowerOff:
		return o.setAndWait(sys, driver.PowerOff, soft, schemas.GracefulShutdownResetType)
	case driver.Rebooting:
		if err := o.setAndWait(sys, driver.PowerOff, hard, schemas.ForceOffResetType); err != nil {
			return err
		}
		if sys, err = o.system(); err != nil { // its PowerState is now stale
			return err
		}
		return o.setAndWait(sys, driver.PowerOn, hard, schemas.OnResetType, schemas.ForceOnResetType)
	default: // driver.SoftRebooting
		if powerState(sys.PowerState) != driver.PowerOn {
			return o.setAndWait(sys, driver.PowerOn, hard, schemas.OnResetType, schemas.ForceOnResetType)
		}
		rt, err := o.pickReset(sys, schemas.GracefulRestartResetType)
		if err != nil {
			return err
		}
		if err := o.reset(sys, rt); err != nil {
			return err
		}
		return o.waitPower(driver.PowerOn, soft, string(schemas.GracefulRestartResetType))
	}
}

// setAndWait sends the first reset type the system offers of types unless
// the node already is in want, then polls until it is.
func (o *op) setAndWait(sys *schemas.ComputerSystem, want string, timeout time.Duration, types ...schemas.ResetType) error {
	if powerState(sys.PowerState) == want {
		return nil
	}
	rt, err := o.pickReset(sys, types...)
	if err != nil {
		return err
	}
	if err := o.reset(sys, rt); err != nil {
		// Some BMCs answer 400/409 to a reset that would change nothing;
		// Ironic then accepts the state the node is in.
		var rf *schemas.Error
		if errors.As(err, &rf) && (rf.HTTPReturnedStatusCode == http.StatusBadRequest || rf.HTTPReturnedStatusCode == http.StatusConflict) {
			if now, rerr := o.d.powerOf(o); rerr == nil && now == want {
				o.d.log.InfoContext(o.c.ctx, "redfish: reset refused but the node is already there",
					"node", o.inf.uuid, "reset", rt, "power_state", now, "err", err)
				return nil
			}
		}
		return err
	}
	return o.waitPower(want, timeout, string(rt))
}

// powerOf reads the node's power state.
func (d *Driver) powerOf(o *op) (string, error) {
	sys, err := o.system()
	if err != nil {
		return "", err
	}
	return powerState(sys.PowerState), nil
}

// pickReset returns the first of want the system offers (all of them when
// it does not say).
func (o *op) pickReset(sys *schemas.ComputerSystem, want ...schemas.ResetType) (schemas.ResetType, error) {
	offered, err := sys.GetSupportedResetTypes()
	if err != nil || len(offered) == 0 {
		return want[0], nil //nolint:nilerr // no ActionInfo: the BMC will say
	}
	for _, w := range want {
		if slices.Contains(offered, w) {
			return w, nil
		}
	}
	names := make([]string, len(offered))
	for i, t := range offered {
		names[i] = string(t)
	}
	return "", fault.New(fault.Invalid, "Redfish BMC %s does not offer reset type %s for node %s (it offers %s)",
		o.c.ep.address, want[0], o.inf.uuid, strings.Join(names, ", "))
}

// reset posts ComputerSystem.Reset.
func (o *op) reset(sys *schemas.ComputerSystem, rt schemas.ResetType) error {
	if _, err := sys.Reset(rt); err != nil {
		return opError(o.inf, err, "Redfish reset %s failed", rt)
	}
	o.d.log.DebugContext(o.c.ctx, "redfish: reset sent", "node", o.inf.uuid, "reset", rt)
	return nil
}

// waitPower polls the power state with backoff until it is want or timeout
// passes; a failed read (a BMC can be busy while the node changes state) is
// retried until the deadline, refused credentials end the wait.
func (o *op) waitPower(want string, timeout time.Duration, action string) error {
	return driver.PowerWait{
		Protocol: "Redfish", Node: o.inf.uuid, Action: action, Want: want, Timeout: timeout,
		Interval: o.d.cfg.PollInterval, MaxInterval: o.d.cfg.MaxPollInterval,
		Read: func(ctx context.Context) (string, error) {
			return o.d.powerOf(&op{d: o.d, inf: o.inf, c: &conn{ep: o.c.ep, ctx: ctx}})
		},
		Fatal: func(err error) bool { return errors.Is(err, ErrAuthentication) },
	}.Run(o.c.ctx)
}

// InjectNMI posts ComputerSystem.Reset with ResetType Nmi, as Ironic's
// redfish management does.
func (d *Driver) InjectNMI(ctx context.Context, n driver.Node) error {
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return err
	}
	rt, err := o.pickReset(sys, schemas.NmiResetType)
	if err != nil {
		return err
	}
	return o.reset(sys, rt)
}

// Health is Ironic's redfish get_node_health: the System's Status.Health
// (OK, Warning, Critical), "" when the BMC gives none.
func (d *Driver) Health(ctx context.Context, n driver.Node) (string, error) {
	_, sys, err := d.open(ctx, n)
	if err != nil {
		return "", err
	}
	return systemHealth(sys.Status.Health), nil
}

// PowerStateHealth is PowerState and Health from one GET of the System.
func (d *Driver) PowerStateHealth(ctx context.Context, n driver.Node) (string, string, error) {
	_, sys, err := d.open(ctx, n)
	if err != nil {
		return "", "", err
	}
	return powerState(sys.PowerState), systemHealth(sys.Status.Health), nil
}

// systemHealth is Ironic's node health for a Redfish Status.Health: OK,
// Warning, Critical, or "" when the BMC does not say.
func systemHealth(h schemas.Health) string {
	switch h {
	case schemas.OKHealth, schemas.WarningHealth, schemas.CriticalHealth:
		return string(h)
	}
	return ""
}
