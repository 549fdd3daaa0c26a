package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// Deploy interfaces besides direct (Ironic's names): ramdisk boots a
// user's ramdisk or ISO as the instance, on every boot, and writes nothing
// (Ironic's RamdiskDeploy, Metal3's live ISO); custom-agent boots the
// agent and runs only the user's deploy steps, no write_image (Ironic's
// CustomAgentDeploy, Metal3's custom deploy).
const (
	DeployRamdisk     = "ramdisk"
	DeployCustomAgent = "custom-agent"
)

// ramdiskBootCapable lists the boot interfaces with Ironic's ramdisk_boot
// capability: the only ones the ramdisk deploy interface accepts.
var ramdiskBootCapable = map[string]bool{
	"pxe": true, "ipxe": true, "http": true,
	BootVirtualMedia: true, BootIDRACVirtualMedia: true, BootILOVirtualMedia: true,
	BootRedfishHTTPS: true, BootILOHTTPS: true,
}

func ramdiskDeploy(n *storage.Node) bool { return n.DeployInterface == DeployRamdisk }

func customAgentDeploy(n *storage.Node) bool { return n.DeployInterface == DeployCustomAgent }

// InstanceBoot is what a node deployed with the ramdisk interface boots:
// an ISO, or a kernel and ramdisk with their command line. URLs are
// resolved (a name castiron hosts becomes its URL).
type InstanceBoot struct {
	ISO     string
	Kernel  string
	Ramdisk string
	Args    []string
}

// ramdiskInstance is Ironic's RamdiskDeploy.validate (the boot interface's
// capability, then get_image_instance_info and validate_image_properties
// for a boot without Glance), with Ironic's messages, and what the node
// then boots. Castiron builds no ISO from a kernel and ramdisk for the
// boot interfaces that boot ISOs (Ironic does): those need boot_iso.
func (c *Conductor) ramdiskInstance(n *storage.Node) (InstanceBoot, error) {
	if !ramdiskBootCapable[n.BootInterface] {
		return InstanceBoot{}, errors.New("Invalid configuration: The boot interface must have the `ramdisk_boot` capability. You are using an incompatible boot interface.")
	}
	ii := n.InstanceInfo
	str := func(k string) string { s, _ := ii[k].(string); return s }
	src, iso := str("image_source"), str("boot_iso")
	if iso != "" {
		if src != "" {
			return InstanceBoot{}, errors.New("An 'image_source' and 'boot_iso' parameter may not be specified at the same time.")
		}
		u, err := c.imageURL(iso)
		if err != nil {
			return InstanceBoot{}, errors.New(strings.Replace(err.Error(), "image_source", "boot_iso", 1))
		}
		return InstanceBoot{ISO: u}, nil
	}
	kernel, ramdisk := str("kernel"), str("ramdisk")
	if kernel == "" && ramdisk == "" && src != "" {
		return InstanceBoot{}, fmt.Errorf("Image %s is missing the following properties: kernel, ramdisk", src)
	}
	var missing []string
	for k, v := range map[string]string{"kernel": kernel, "ramdisk": ramdisk} {
		if v == "" {
			missing = append(missing, k)
		}
	}
	if len(missing) > 0 {
		if len(missing) == 2 {
			missing = []string{"kernel", "ramdisk"}
		}
		return InstanceBoot{}, fmt.Errorf("Cannot validate image information for node %s because one or more parameters are missing from its instance_info and insufficient information is present to boot from a remote volume. Missing are: ['%s']", n.UUID, strings.Join(missing, "', '"))
	}
	if isoBoot(n.BootInterface) {
		return InstanceBoot{}, fmt.Errorf("Booting instance_info kernel and ramdisk through boot interface %s is not implemented in castiron (Ironic builds an ISO of them): give instance_info.boot_iso, or use a network boot interface (ipxe, pxe, http)", n.BootInterface)
	}
	out := InstanceBoot{Args: []string{"root=/dev/ram0", "text"}}
	var err error
	if out.Kernel, err = c.imageURL(kernel); err != nil {
		return InstanceBoot{}, errors.New(strings.Replace(err.Error(), "image_source", "kernel", 1))
	}
	if out.Ramdisk, err = c.imageURL(ramdisk); err != nil {
		return InstanceBoot{}, errors.New(strings.Replace(err.Error(), "image_source", "ramdisk", 1))
	}
	out.Args = append(out.Args, strings.Fields(str("ramdisk_kernel_arguments"))...)
	return out, nil
}

// checkRamdiskDeploy is the ramdisk and custom-agent part of the deploy
// verb's checks (Ironic's do_node_deploy validation, its message prefix).
func (c *Conductor) checkRamdiskDeploy(n *storage.Node, req ProvisionRequest) error {
	if !ramdiskDeploy(n) {
		return nil
	}
	if _, err := c.ramdiskInstance(n); err != nil {
		return fault.New(fault.Invalid, "Failed to validate deploy or power info for node %s: %v", n.UUID, err)
	}
	if len(req.DeploySteps) > 0 {
		// Ironic would run the out-of-band ones; castiron's ramdisk deploy
		// has only its own step.
		return fault.New(fault.Invalid, "deploy_steps with deploy interface ramdisk are not implemented in castiron")
	}
	return nil
}

// ramdiskDeployTask is RamdiskDeploy.deploy: power off, the boot
// interface's prepare_instance (the instance's boot made persistent), power
// on; the node is active at once: nothing waits for an agent.
func ramdiskDeployTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	if _, ok := n.InstanceInfo["configdrive"]; ok {
		// Ironic attaches it as a virtual USB stick for virtual media boot
		// interfaces; castiron does not yet (Ironic's own warning for the
		// others).
		c.log.WarnContext(ctx, "a configuration drive is present in a ramdisk deployment request; castiron ignores it", "node", n.UUID, "boot", n.BootInterface)
	}
	if err := c.bootRamdiskInstance(ctx, n); err != nil {
		return failed(err)
	}
	on := driver.PowerOn
	return outcome{ev: EvDone, mutate: func(n *storage.Node) {
		n.PowerState = &on
		n.DeployStep = storage.JSONObject{}
		clearSteps(n)
	}}
}

// bootRamdiskInstance powers the node off, prepares the boot of its
// ramdisk instance and powers it on (deploy, rebuild, unrescue).
func (c *Conductor) bootRamdiskInstance(ctx context.Context, n *storage.Node) error {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	inst, err := c.ramdiskInstance(n)
	if err != nil {
		return err
	}
	dn := driverNode(n)
	if !n.DisablePowerOff {
		if err := hw.Power.SetPowerState(ctx, dn, driver.PowerOff, c.cfg.PowerTimeout); err != nil {
			return fmt.Errorf("Failed to power off node %s before booting its ramdisk instance: %v", n.UUID, err)
		}
		dn.PowerState = driver.PowerOff
	}
	if err := c.prepareInstanceSecureBoot(ctx, hw, n, "deploy"); err != nil {
		return err
	}
	if err := c.prepareRamdiskInstance(ctx, hw, n, dn, inst); err != nil {
		return err
	}
	target := driver.PowerOn
	if n.DisablePowerOff {
		target = driver.Rebooting
	}
	if err := hw.Power.SetPowerState(ctx, dn, target, c.cfg.PowerTimeout); err != nil {
		return fmt.Errorf("Failed to power on node %s to boot its ramdisk instance: %v", n.UUID, err)
	}
	c.log.InfoContext(ctx, "ramdisk instance booting", "node", n.UUID, "state", n.ProvisionState, "boot", n.BootInterface, "iso", inst.ISO, "kernel", inst.Kernel)
	return nil
}

// prepareRamdiskInstance is the boot interface's prepare_instance for a
// ramdisk deploy: the ISO inserted as virtual CD (or set as the UEFI HTTP
// boot URL) and the boot device made persistent; for a network boot, the
// boot device PXE persistently (castiron's boot server answers the node
// with its instance while it is deployed, BootTarget).
func (c *Conductor) prepareRamdiskInstance(ctx context.Context, hw *HardwareType, n *storage.Node, dn driver.Node, inst InstanceBoot) error {
	switch bootMethodOf(n.BootInterface) {
	case bootVirtualMedia:
		vm, ok := managementFeature[driver.VirtualMedia](n, hw)
		if !ok {
			return fmt.Errorf("boot interface %s needs a management interface with virtual media (redfish); %s has none", n.BootInterface, n.ManagementInterface)
		}
		if err := vm.InsertMedia(ctx, dn, driver.MediaCDROM, inst.ISO); err != nil {
			return fmt.Errorf("Failed to insert the boot ISO %s as virtual media: %v", inst.ISO, err)
		}
		if err := hw.Management.SetBootDevice(ctx, dn, driver.BootCDROM, true); err != nil {
			c.ejectRamdiskISO(ctx, hw, n)
			return fmt.Errorf("Failed to set the boot device to cdrom: %v", err)
		}
	case bootUEFIHTTP:
		hb, ok := managementFeature[driver.HTTPBooter](n, hw)
		if !ok {
			return fmt.Errorf("boot interface %s needs a management interface with UEFI HTTP boot (redfish); %s has none", n.BootInterface, n.ManagementInterface)
		}
		if err := hb.SetHTTPBoot(ctx, dn, inst.ISO, true); err != nil {
			return fmt.Errorf("Failed to set UEFI HTTP boot from %s: %v", inst.ISO, err)
		}
	default:
		if err := hw.Management.SetBootDevice(ctx, dn, driver.BootPXE, true); err != nil {
			return fmt.Errorf("Failed to set the boot device to PXE: %v", err)
		}
	}
	return nil
}

// cleanUpRamdiskInstance is the boot interface's clean_up_instance at tear
// down, after the power off: the ISO ejected (powerOff did it for virtual
// media); a persistent UEFI HTTP boot of the ISO pointed back at the disk
// (best effort: cleaning sets its own boot next). A network boot needs
// nothing: the boot server stops answering with the instance once the
// node leaves active.
func (c *Conductor) cleanUpRamdiskInstance(ctx context.Context, n *storage.Node) {
	if !ramdiskDeploy(n) || bootMethodOf(n.BootInterface) != bootUEFIHTTP {
		return
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return
	}
	if err := hw.Management.SetBootDevice(ctx, driverNode(n), driver.BootDisk, true); err != nil {
		c.log.WarnContext(ctx, "resetting the boot device after a ramdisk instance failed", "node", n.UUID, "err", err)
	}
}

// instanceBootStates are the states in which a ramdisk-deployed node's
// network boot gets its instance: while the deploy (or unrescue) powers it
// on, and while it is active.
var instanceBootStates = map[State]bool{Deploying: true, Active: true, Unrescuing: true}

// instanceBootOf is the network boot castiron gives n now, if n is a
// ramdisk deploy that boots by the network.
func (c *Conductor) instanceBootOf(n *storage.Node) (*InstanceBoot, bool) {
	if !ramdiskDeploy(n) || isoBoot(n.BootInterface) || !instanceBootStates[State(n.ProvisionState)] {
		return nil, false
	}
	inst, err := c.ramdiskInstance(n)
	if err != nil {
		return nil, false
	}
	return &inst, true
}
