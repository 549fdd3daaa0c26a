package ipmi

import (
	"context"
	"slices"

	"castiron/engine/driver"
	"castiron/fault"

	"github.com/bougou/go-ipmi/pkg/types"
)

// Boot device selectors (Set System Boot Options, parameter 5, data 2 bits
// 5:2), the values behind Ironic's BOOT_DEVICE_HEXA_MAP.
var bootSelectors = map[string]types.BootDeviceSelector{
	driver.BootPXE:   types.BootDeviceSelectorForcePXE,
	driver.BootDisk:  types.BootDeviceSelectorForceHardDrive,
	driver.BootCDROM: types.BootDeviceSelectorForceCDROM,
	driver.BootBIOS:  types.BootDeviceSelectorForceBIOSSetup,
	driver.BootSafe:  types.BootDeviceSelectorForceHardDriveSafe,
}

// SetBootDevice sets the boot device for the next boot (or all boots), with
// the EFI bit when the node boots UEFI, as Ironic's ipmitool driver does.
func (d *Driver) SetBootDevice(ctx context.Context, n driver.Node, device string, persistent bool) error {
	if !slices.Contains(d.SupportedBootDevices(), device) {
		return fault.New(fault.Invalid, "Invalid boot device %s specified.", device)
	}
	inf, err := parseInfo(n)
	if err != nil {
		return err
	}
	if inf.forceBootDevice {
		// Ironic: the BMC gets a one-time setting, re-applied at every power
		// on from driver_internal_info (which the engine keeps).
		persistent = false
	}
	return d.session(ctx, inf, func(s *conn) error {
		return s.setBootDevice(ctx, device, persistent)
	})
}

// setBootDevice writes boot flags with one Set System Boot Options (param 5),
// the same bytes as Ironic's raw "0x00 0x08 0x05 0xe0|0xa0 <dev> 0 0 0" for
// UEFI. It does not wrap it in "set in progress" (param 0) like go-ipmi's
// SetBootParamBootFlags: ipmi_sim, and other BMCs, reject that parameter.
func (s *conn) setBootDevice(ctx context.Context, device string, persistent bool) error {
	c, err := s.client(ctx)
	if err != nil {
		return err
	}
	if s.inf.disableBootTimeout {
		// Ironic's raw "0x00 0x08 0x03 0x08": keep the boot flags valid past
		// the 60 s the spec lets a BMC wait for the next boot.
		p := &types.BootOptionParam_BMCBootFlagValidBitClear{DontClearOnCommandReceivedTimeout: true}
		if err := c.SetSystemBootOptionsParamFor(ctx, p); err != nil {
			return wrapBMC(ctx, s.inf, err,
				"IPMI set boot flag valid bit clearing failed (set ipmi_disable_boot_timeout=false if this BMC does not support it)")
		}
	}
	flags := bootFlags(s.inf, device, persistent)
	if err := c.SetSystemBootOptionsParamFor(ctx, flags); err != nil {
		return wrapBMC(ctx, s.inf, err, "IPMI set boot device %s (persistent=%t, uefi=%t) failed", device, persistent, s.inf.uefi)
	}
	return nil
}

// bootFlags is what go-ipmi's SetBootDevice sends (valid bit, persistence,
// EFI bit, selector), built here so tests can compare it with Ironic's bytes.
func bootFlags(inf *info, device string, persistent bool) *types.BootOptionParam_BootFlags {
	sel := bootSelectors[device]
	if inf.uefi && device == driver.BootDisk && inf.vendor == "supermicro" {
		// Ironic: Supermicro boots the UEFI disk through selector 0x09
		// (raw 0x24) rather than 0x02.
		sel = types.BootDeviceSelectorForceRemoteMedia
	}
	bootType := types.BIOSBootTypeLegacy
	if inf.uefi {
		bootType = types.BIOSBootTypeEFI
	}
	return &types.BootOptionParam_BootFlags{
		BootFlagsValid:     true,
		Persist:            persistent,
		BIOSBootType:       bootType,
		BootDeviceSelector: sel,
	}
}

// BootDevice reads the boot flags (Get System Boot Options, param 5), like
// "ipmitool chassis bootparam get 5". BootDevice is "" when the BMC has no
// override or one Ironic has no name for.
func (d *Driver) BootDevice(ctx context.Context, n driver.Node) (driver.BootDevice, error) {
	inf, err := parseInfo(n)
	if err != nil {
		return driver.BootDevice{}, err
	}
	if dev, ok := forcedBootDevice(inf, n); ok {
		persistent := true
		return driver.BootDevice{BootDevice: dev, Persistent: &persistent}, nil
	}
	var out driver.BootDevice
	err = d.session(ctx, inf, func(s *conn) error {
		c, err := s.client(ctx)
		if err != nil {
			return err
		}
		flags := &types.BootOptionParam_BootFlags{}
		if err := c.GetSystemBootOptionsParamFor(ctx, flags); err != nil {
			return wrapBMC(ctx, inf, err, "IPMI get boot device failed")
		}
		// Like Ironic, read the selector even when the valid bit is clear
		// (ipmi_sim never sets it).
		persistent := flags.Persist
		out = driver.BootDevice{BootDevice: deviceName(flags.BootDeviceSelector), Persistent: &persistent}
		return nil
	})
	return out, err
}

// deviceName maps a selector to Ironic's name, as Ironic matches ipmitool's
// text ("PXE", "Hard-Drive", "Safe-Mode", "BIOS", "CD/DVD").
func deviceName(sel types.BootDeviceSelector) string {
	switch sel {
	case types.BootDeviceSelectorForcePXE:
		return driver.BootPXE
	case types.BootDeviceSelectorForceHardDrive, types.BootDeviceSelectorForceRemoteHardDrive:
		return driver.BootDisk
	case types.BootDeviceSelectorForceHardDriveSafe:
		return driver.BootSafe
	case types.BootDeviceSelectorForceCDROM, types.BootDeviceSelectorForceRemoteCDROM:
		return driver.BootCDROM
	case types.BootDeviceSelectorForceBIOSSetup:
		return driver.BootBIOS
	}
	return ""
}

// forcedBootDevice is Ironic's ensure_next_boot_device read side: with
// ipmi_force_boot_device, the persistent device lives in driver_internal_info
// (persistent_boot_device), unless is_next_boot_persistent is false.
func forcedBootDevice(inf *info, n driver.Node) (string, bool) {
	if !inf.forceBootDevice {
		return "", false
	}
	if next, ok := n.InternalInfo[internalNextPer].(bool); ok && !next {
		return "", false
	}
	dev, _ := n.InternalInfo[internalBootDev].(string)
	_, known := bootSelectors[dev]
	return dev, known
}
