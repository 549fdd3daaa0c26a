package redfish

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/stmcginnis/gofish/schemas"
)

// bootTargets is Ironic's BOOT_DEVICE_MAP_REV, in its order.
var bootTargets = []struct {
	device string
	target schemas.BootSource
}{
	{driver.BootPXE, schemas.PxeBootSource},
	{driver.BootDisk, schemas.HddBootSource},
	{driver.BootCDROM, schemas.CdBootSource},
	{driver.BootBIOS, schemas.BiosSetupBootSource},
	{driver.BootUEFIHTTP, schemas.UefiHTTPBootSource},
}

func targetOf(device string) (schemas.BootSource, bool) {
	for _, t := range bootTargets {
		if t.device == device {
			return t.target, true
		}
	}
	return "", false
}

func deviceOf(target schemas.BootSource) string {
	for _, t := range bootTargets {
		if t.target == target {
			return t.device
		}
	}
	return ""
}

// fullBootRequest lists vendors (properties.vendor, substring) whose BMCs
// want target, mode and enabled in every boot PATCH (Ironic's
// VENDORS_REQUIRING_FULL_BOOT_REQUEST).
var fullBootRequest = []string{"american megatrends international", "ami", "asrockrack", "redfish_compatible"}

func needsFullBootRequest(vendor string) bool {
	for _, v := range fullBootRequest {
		if vendor != "" && strings.Contains(vendor, v) {
			return true
		}
	}
	return false
}

// SupportedBootDevices is Ironic's list for the redfish management interface.
func (d *Driver) SupportedBootDevices() []string {
	out := make([]string, len(bootTargets))
	for i, t := range bootTargets {
		out[i] = t.device
	}
	return out
}

// SetBootDevice sets the boot source override: target and, when it
// changes (always on Supermicro), BootSourceOverrideEnabled Once or
// Continuous, as Ironic does. A BMC that refuses Continuous gets Once, as
// in Ironic (which re-applies it before every power on; castiron logs it).
func (d *Driver) SetBootDevice(ctx context.Context, n driver.Node, device string, persistent bool) error {
	return d.setBoot(ctx, n, device, persistent, nil)
}

// SetHTTPBoot is driver.HTTPBooter: the boot override to UefiHttp with
// HttpBootUri url in the same PATCH, as Ironic's redfish management
// set_boot_device(UEFIHTTP, http_boot_url=...) sends it through sushy.
func (d *Driver) SetHTTPBoot(ctx context.Context, n driver.Node, url string, persistent bool) error {
	if url == "" {
		return fault.New(fault.Invalid, "UEFI HTTP boot of node %s needs a URL", n.UUID)
	}
	return d.setBoot(ctx, n, driver.BootUEFIHTTP, persistent, &url)
}

// setBoot is SetBootDevice with an optional HttpBootUri.
func (d *Driver) setBoot(ctx context.Context, n driver.Node, device string, persistent bool, httpURI *string) error {
	target, ok := targetOf(device)
	if !ok {
		return fault.New(fault.Invalid, "Invalid boot device %s specified.", device)
	}
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return err
	}
	if allowed := sys.Boot.AllowableBootSourceOverrideTargetValues; len(allowed) > 0 && !slices.Contains(allowed, target) {
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = string(a)
		}
		return fault.New(fault.Invalid, "Redfish BMC %s does not offer boot device %s (%s) for node %s; it offers %s",
			o.c.ep.address, device, target, o.inf.uuid, strings.Join(names, ", "))
	}
	want := schemas.OnceBootSourceOverrideEnabled
	if persistent {
		want = schemas.ContinuousBootSourceOverrideEnabled
	}
	b := &schemas.Boot{BootSourceOverrideTarget: target, HTTPBootURI: httpURI}
	if o.inf.vendor == "supermicro" || sys.Boot.BootSourceOverrideEnabled != want {
		b.BootSourceOverrideEnabled = want
	}
	if needsFullBootRequest(o.inf.vendor) {
		b.BootSourceOverrideEnabled = want
		b.BootSourceOverrideMode = sys.Boot.BootSourceOverrideMode
		if b.BootSourceOverrideMode == "" {
			b.BootSourceOverrideMode = schemas.UEFIBootSourceOverrideMode
		}
	}
	err = sys.SetBoot(b)
	if err != nil && b.BootSourceOverrideEnabled == schemas.ContinuousBootSourceOverrideEnabled {
		d.log.WarnContext(ctx, "redfish: BMC refused a persistent boot device, setting it once",
			"node", o.inf.uuid, "device", device, "err", err)
		b.BootSourceOverrideEnabled = schemas.OnceBootSourceOverrideEnabled
		err = sys.SetBoot(b)
	}
	if err != nil {
		return opError(o.inf, err, "Redfish set boot device %s (persistent=%t) failed", device, persistent)
	}
	return nil
}

// BootDevice reads the boot source override: device from its target ("" for
// none or one Ironic has no name for), persistent from Enabled (Continuous
// true, Once false, otherwise unknown). Some BMCs read Once back as
// Continuous (sushy-tools): see driver.VirtualMedia.
func (d *Driver) BootDevice(ctx context.Context, n driver.Node) (driver.BootDevice, error) {
	_, sys, err := d.open(ctx, n)
	if err != nil {
		return driver.BootDevice{}, err
	}
	out := driver.BootDevice{BootDevice: deviceOf(sys.Boot.BootSourceOverrideTarget)}
	switch sys.Boot.BootSourceOverrideEnabled {
	case schemas.ContinuousBootSourceOverrideEnabled:
		out.Persistent = new(true)
	case schemas.OnceBootSourceOverrideEnabled:
		out.Persistent = new(false)
	}
	return out, nil
}

// bootModes maps Ironic's boot modes to BootSourceOverrideMode.
var bootModes = map[string]schemas.BootSourceOverrideMode{
	"uefi": schemas.UEFIBootSourceOverrideMode,
	"bios": schemas.LegacyBootSourceOverrideMode,
}

// SetBootMode sets BootSourceOverrideMode and, as Ironic does, when it does
// not read back at once, reboots the node to apply it, waits for it
// (BootConfigTimeout) and restores the power state.
func (d *Driver) SetBootMode(ctx context.Context, n driver.Node, mode string) error {
	want, ok := bootModes[mode]
	if !ok {
		return fault.New(fault.Invalid, "Invalid boot mode %s specified.", mode)
	}
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return err
	}
	unknown := sys.Boot.BootSourceOverrideMode == ""
	b := &schemas.Boot{BootSourceOverrideMode: want}
	if needsFullBootRequest(o.inf.vendor) {
		b.BootSourceOverrideEnabled = sys.Boot.BootSourceOverrideEnabled
		if b.BootSourceOverrideEnabled == "" {
			b.BootSourceOverrideEnabled = schemas.OnceBootSourceOverrideEnabled
		}
		b.BootSourceOverrideTarget = sys.Boot.BootSourceOverrideTarget
		if b.BootSourceOverrideTarget == "" {
			b.BootSourceOverrideTarget = schemas.PxeBootSource
		}
	}
	if err := sys.SetBoot(b); err != nil {
		if unknown {
			// No mode to read and none accepted: not something this BMC does.
			return fault.Wrap(fault.Invalid, err, "Driver %s does not support set_boot_mode (disabled or not implemented).", "redfish")
		}
		return opError(o.inf, err, "Setting boot mode to %s failed", mode)
	}
	if unknown {
		d.log.WarnContext(ctx, "redfish: boot mode set but the BMC does not report it; assuming it applies at the next boot",
			"node", o.inf.uuid, "mode", mode)
		return nil
	}
	return o.applyByReboot("boot mode", mode, func() (bool, string, error) {
		s, err := o.system()
		if err != nil {
			return false, "", err
		}
		return s.Boot.BootSourceOverrideMode == want, string(s.Boot.BootSourceOverrideMode), nil
	})
}

// SetSecureBoot turns UEFI secure boot on or off (SecureBoot resource),
// applying it by a reboot when it does not read back at once.
func (d *Driver) SetSecureBoot(ctx context.Context, n driver.Node, on bool) error {
	o, sys, err := d.open(ctx, n)
	if err != nil {
		return err
	}
	sb, err := sys.SecureBoot()
	if err != nil {
		return opError(o.inf, err, "Redfish read of SecureBoot failed")
	}
	if sb == nil {
		return fault.New(fault.Invalid, "Driver %s does not support set_secure_boot_state (disabled or not implemented).", "redfish")
	}
	if sb.SecureBootEnable == on {
		return nil
	}
	if sys.Boot.BootSourceOverrideMode == schemas.LegacyBootSourceOverrideMode {
		return fault.New(fault.Invalid, "Configuring secure boot requires UEFI for node %s", o.inf.uuid)
	}
	if err := sb.Patch(sb.ODataID, map[string]any{"SecureBootEnable": on}); err != nil {
		return opError(o.inf, err, "Failed to set secure boot state to %t", on)
	}
	return o.applyByReboot("secure boot", boolWord(on), func() (bool, string, error) {
		s, err := schemas.GetSecureBoot(o.c, sb.ODataID)
		if err != nil {
			return false, "", err
		}
		return s.SecureBootEnable == on, boolWord(s.SecureBootEnable), nil
	})
}

// boolWord is how Ironic's messages print a boolean.
func boolWord(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// applyByReboot is Ironic's _wait_for_boot_mode / _wait_for_secure_boot:
// if check does not pass yet, reboot, poll check every 15 s (first after
// one poll interval) up to BootConfigTimeout, then return the node to the
// power state it had.
func (o *op) applyByReboot(what, value string, check func() (bool, string, error)) error {
	if ok, _, err := check(); err == nil && ok {
		return nil
	}
	before, err := o.d.powerOf(o)
	if err != nil {
		return err
	}
	o.d.log.InfoContext(o.c.ctx, "redfish: rebooting to apply "+what, "node", o.inf.uuid, "value", value)
	if err := o.setPower(driver.Rebooting, 0, 0); err != nil {
		return err
	}
	deadline := time.Now().Add(o.d.cfg.BootConfigTimeout)
	delay := o.d.cfg.PollInterval
	for {
		ok, cur, err := check()
		if err == nil && ok {
			break
		}
		if errors.Is(err, ErrAuthentication) {
			return err
		}
		if time.Now().After(deadline) {
			return fault.New(fault.Internal, "Timeout reached while waiting for %s of node %s to become %s, current is %s",
				what, o.inf.uuid, value, cur)
		}
		t := time.NewTimer(delay)
		select {
		case <-o.c.ctx.Done():
			t.Stop()
			return o.c.ctx.Err()
		case <-t.C:
		}
		delay = min(2*delay, 15*time.Second)
	}
	return o.setPower(before, 0, 0)
}
