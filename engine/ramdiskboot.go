package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"castiron/engine/driver"
	"castiron/ramdisk/iso"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/trust"
	"castiron/storage"
)

// BootVirtualMedia is Ironic's name of the boot interface that boots the
// ramdisk from an ISO the BMC attaches as a virtual CD (no DHCP, no PXE).
const BootVirtualMedia = "redfish-virtual-media"

// VMediaConfig is what the virtual media boot interface needs; without it
// (nil in Config) nodes using that interface fail to boot with a clear
// error.
type VMediaConfig struct {
	// ISOs builds and keeps the per-node ISOs (served under
	// /boot/vmedia/ from its Dir).
	ISOs *iso.Cache
	// RamdiskDir holds vmlinuz, initramfs and the ISO loaders (make ramdisk).
	RamdiskDir string
	// APIURL is the API as the ramdisk reaches it (--public-url), and the
	// default base URL of the ISOs a BMC fetches (a node's
	// driver_info.external_http_url overrides that, as in Ironic).
	APIURL string
	// CABundle, set when castiron speaks TLS, is the CA bundle the ISO's
	// agent trusts (at trust.AgentCAPath): it then calls APIURL over HTTPS
	// only, as an iPXE-booted agent does.
	CABundle func() ([]byte, error)
}

// bootAgent boots castiron's ramdisk on the node, the first half of every
// agent-driven verb: by the network (PXE/iPXE: boot device pxe, power on or
// reboot) or, for boot interface redfish-virtual-media, from the node's ISO
// (power off, insert the ISO, boot device cdrom once, power on). The second
// half (the agent's callback) is served by the ramdisk endpoints.
func bootAgent(ctx context.Context, c *Conductor, n *storage.Node) error {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	if err := c.forgetAgent(ctx, n.UUID); err != nil {
		return err
	}
	dn := driverNode(n)
	target := driver.PowerOn
	if isoBoot(n.BootInterface) {
		prepare := c.insertRamdiskISO
		if bootMethodOf(n.BootInterface) == bootUEFIHTTP {
			prepare = c.httpBootRamdiskISO
		}
		if err := prepare(ctx, hw, n); err != nil {
			return err
		}
		if n.DisablePowerOff && dn.PowerState != driver.PowerOff {
			target = driver.Rebooting // in place: the ISO boots at the reset
		} else {
			dn.PowerState = driver.PowerOff
		}
	} else {
		if err := hw.Management.SetBootDevice(ctx, dn, driver.BootPXE, false); err != nil {
			return fmt.Errorf("failed to set boot device to PXE: %w", err)
		}
		if dn.PowerState == driver.PowerOn {
			target = driver.Rebooting
		}
	}
	if err := hw.Power.SetPowerState(ctx, dn, target, c.cfg.PowerTimeout); err != nil {
		c.endRamdisk(ctx, n)
		return fmt.Errorf("failed to power on the node to boot the ramdisk: %w", err)
	}
	on := driver.PowerOn
	_, err = c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		cur.PowerState = &on
		return nil, nil
	})
	return err
}

// insertRamdiskISO is the virtual media half of bootAgent, in the order
// BMCs want it (Ironic's prepare_ramdisk): the node powered off (insert and
// eject take effect at the next power on; a disable_power_off node stays
// on and is reset instead), the ISO built (or reused) and inserted, then
// the one-time boot override to the CD.
func (c *Conductor) insertRamdiskISO(ctx context.Context, hw *HardwareType, n *storage.Node) error {
	vm, ok := managementFeature[driver.VirtualMedia](n, hw)
	if !ok {
		return fmt.Errorf("boot interface %s needs a management interface with virtual media (redfish); %s has none", n.BootInterface, n.ManagementInterface)
	}
	url, err := c.ramdiskISO(ctx, n)
	if err != nil {
		return err
	}
	dn := driverNode(n)
	if dn.PowerState != driver.PowerOff && !n.DisablePowerOff {
		if err := hw.Power.SetPowerState(ctx, dn, driver.PowerOff, c.cfg.PowerTimeout); err != nil {
			return fmt.Errorf("failed to power off the node before inserting virtual media: %w", err)
		}
		dn.PowerState = driver.PowerOff
	}
	if err := vm.InsertMedia(ctx, dn, driver.MediaCDROM, url); err != nil {
		return fmt.Errorf("failed to insert the ramdisk ISO %s as virtual media: %w", url, err)
	}
	if err := hw.Management.SetBootDevice(ctx, dn, driver.BootCDROM, false); err != nil {
		c.ejectRamdiskISO(ctx, hw, n)
		return fmt.Errorf("failed to set boot device to cdrom: %w", err)
	}
	c.log.InfoContext(ctx, "ramdisk ISO inserted", "node", n.UUID, "state", n.ProvisionState, "url", url)
	return nil
}

// httpBootRamdiskISO is bootAgent's half for redfish-https (Ironic's
// RedfishHttpsBoot.prepare_ramdisk): the node powered off (a
// disable_power_off node stays on and is reset instead), the ISO built (or
// reused), then a one-time boot override to UEFI HTTP with HttpBootUri
// pointing at the ISO, which the firmware fetches and boots (the ISO's EFI
// loader). Nothing is attached, so nothing is ejected afterwards.
func (c *Conductor) httpBootRamdiskISO(ctx context.Context, hw *HardwareType, n *storage.Node) error {
	hb, ok := managementFeature[driver.HTTPBooter](n, hw)
	if !ok {
		return fmt.Errorf("boot interface %s needs a management interface with UEFI HTTP boot (redfish); %s has none", n.BootInterface, n.ManagementInterface)
	}
	url, err := c.ramdiskISO(ctx, n)
	if err != nil {
		return err
	}
	dn := driverNode(n)
	if dn.PowerState != driver.PowerOff && !n.DisablePowerOff {
		if err := hw.Power.SetPowerState(ctx, dn, driver.PowerOff, c.cfg.PowerTimeout); err != nil {
			return fmt.Errorf("failed to power off the node before setting UEFI HTTP boot: %w", err)
		}
	}
	if err := hb.SetHTTPBoot(ctx, dn, url, false); err != nil {
		return fmt.Errorf("failed to set UEFI HTTP boot from %s: %w", url, err)
	}
	c.log.InfoContext(ctx, "UEFI HTTP boot of the ramdisk ISO set", "node", n.UUID, "state", n.ProvisionState, "url", url)
	return nil
}

// ejectRamdiskISO ends a virtual media boot of the ramdisk (best effort:
// the node's state does not depend on it, and a failure is logged).
func (c *Conductor) ejectRamdiskISO(ctx context.Context, hw *HardwareType, n *storage.Node) {
	vm, ok := managementFeature[driver.VirtualMedia](n, hw)
	if !ok {
		return
	}
	if err := vm.EjectMedia(ctx, driverNode(n), driver.MediaCDROM); err != nil {
		c.log.WarnContext(ctx, "ejecting the ramdisk ISO failed", "node", n.UUID, "state", n.ProvisionState, "err", err)
		return
	}
	c.log.InfoContext(ctx, "ramdisk ISO ejected", "node", n.UUID, "state", n.ProvisionState)
}

// endRamdisk is called where a ramdisk boot ends (work done, abort,
// failure, timeout): for virtual media it ejects the ISO; a network boot
// needs nothing (the boot gate stops answering by the node's state).
func (c *Conductor) endRamdisk(ctx context.Context, n *storage.Node) {
	if bootMethodOf(n.BootInterface) != bootVirtualMedia {
		return
	}
	if hw, err := c.hardwareOf(n); err == nil {
		c.ejectRamdiskISO(ctx, hw, n)
	}
}

// ramdiskISO makes sure the node's ISO exists for its current inputs and
// returns the URL its BMC fetches it from.
func (c *Conductor) ramdiskISO(ctx context.Context, n *storage.Node) (string, error) {
	vc := c.cfg.VMedia
	if vc == nil || vc.ISOs == nil || vc.APIURL == "" {
		return "", errors.New("virtual media boot is not configured: castiron serve needs --public-url (the URL nodes and BMCs reach castiron at)")
	}
	spec, err := c.isoSpec(ctx, n, vc)
	if err != nil {
		return "", err
	}
	file, built, err := vc.ISOs.Ensure(ctx, n.UUID, spec)
	if err != nil {
		return "", fmt.Errorf("failed to build the ramdisk ISO: %w", err)
	}
	if built != nil {
		c.log.InfoContext(ctx, "ramdisk ISO built", "node", n.UUID, "state", n.ProvisionState, "file", file,
			"bytes", built.Size, "took", built.Duration.Round(time.Millisecond))
	}
	base := vc.APIURL
	if u, _ := n.DriverInfo["external_http_url"].(string); u != "" {
		base = u
	}
	return strings.TrimRight(base, "/") + "/boot/vmedia/" + file, nil
}

// isoSpec is the node's ISO: the ramdisk, the agent's kernel arguments
// (API, node, inspection when inspecting, boot_method=vmedia, BOOTIF when
// the node has a single PXE port) and its network_data, both in the
// ramdisk's root (where the agent reads it) and, as Ironic does, in the
// ISO's openstack/latest/network_data.json.
func (c *Conductor) isoSpec(ctx context.Context, n *storage.Node, vc *VMediaConfig) (iso.Spec, error) {
	loaders, err := iso.FindLoaders(vc.RamdiskDir)
	if err != nil {
		return iso.Spec{}, err
	}
	api := strings.TrimRight(vc.APIURL, "/")
	inspect := bootPurpose[State(n.ProvisionState)] == "inspect"
	args := protocol.AgentArgs(api, n.UUID, "", inspect)
	args = append(args, protocol.ParamBootMethod+"=vmedia")
	if inspect {
		args = append(args, c.cfg.InspectionKernelArgs...)
	}
	if mac := c.singlePXEMAC(ctx, n.UUID); mac != "" {
		args = append(args, protocol.ParamBootIF+"=01-"+strings.ReplaceAll(mac, ":", "-"))
	}
	spec := iso.Spec{
		Kernel:    vc.RamdiskDir + "/vmlinuz",
		Initramfs: vc.RamdiskDir + "/initramfs",
		Args:      args,
		Loaders:   loaders,
	}
	spec.Overlay = map[string][]byte{}
	if len(n.NetworkData) > 0 {
		nd, err := json.MarshalIndent(n.NetworkData, "", "  ")
		if err != nil {
			return iso.Spec{}, err
		}
		spec.Overlay[protocol.NetworkDataFile] = nd
		spec.Files = map[string][]byte{"openstack/latest/network_data.json": nd}
	}
	if vc.CABundle != nil {
		// Part of the ISO's key: a rotated CA builds a new ISO.
		ca, err := vc.CABundle()
		if err != nil {
			return iso.Spec{}, fmt.Errorf("CA bundle for the ramdisk ISO: %w", err)
		}
		spec.Overlay[strings.TrimPrefix(trust.AgentCAPath, "/")] = ca
	}
	return spec, nil
}

// singlePXEMAC is the MAC of the node's only pxe_enabled port, "" when it
// has none or several.
func (c *Conductor) singlePXEMAC(ctx context.Context, uuid string) string {
	ports, err := c.store.ListPorts(ctx, storage.PortQuery{NodeUUID: &uuid})
	if err != nil {
		return ""
	}
	mac := ""
	for _, p := range ports {
		if p.PXEEnabled {
			if mac != "" {
				return ""
			}
			mac = p.Address
		}
	}
	return mac
}

// forgetAgent drops the previous boot's agent token before a new ramdisk
// boots, so only the agent that boots now can look itself up.
func (c *Conductor) forgetAgent(ctx context.Context, uuid string) error {
	_, err := c.store.UpdateNode(ctx, uuid, func(cur *storage.Node) (*storage.Event, error) {
		wipeToken(cur)
		return nil, nil
	})
	return err
}

// powerOffOrReboot ends an inspection's ramdisk as Ironic's inspector
// clean_up does: power off, or, for a node with disable_power_off, a reboot
// in place (the driver resets it).
func powerOffOrReboot(ctx context.Context, c *Conductor, n *storage.Node) error {
	if !n.DisablePowerOff {
		return powerOff(ctx, c, n)
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	c.endRamdisk(ctx, n)
	return hw.Power.SetPowerState(ctx, driverNode(n), driver.Rebooting, c.cfg.PowerTimeout)
}

// powerOff is best effort at the end of aborts and failures; it also ends
// a virtual media boot (the ISO is ejected). A node with disable_power_off
// stays on (Ironic skips every such power off).
func powerOff(ctx context.Context, c *Conductor, n *storage.Node) error {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	if n.DisablePowerOff {
		c.endRamdisk(ctx, n)
		c.log.InfoContext(ctx, "power off skipped: disable_power_off", "node", n.UUID, "state", n.ProvisionState)
		return nil
	}
	err = hw.Power.SetPowerState(ctx, driverNode(n), driver.PowerOff, c.cfg.PowerTimeout)
	c.endRamdisk(ctx, n)
	if err != nil {
		return err
	}
	off := driver.PowerOff
	_, err = c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		cur.PowerState = &off
		return nil, nil
	})
	return err
}
