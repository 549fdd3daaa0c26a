package engine

import (
	"context"
	"fmt"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// managementStepTable is the management interface's part of the step
// table: Ironic's redfish management deploy and clean steps that reset the
// UEFI secure boot keys (priority 0; they keep Ironic's default
// requires_ramdisk).
var managementStepTable = []stepDef{
	{iface: "management", name: "reset_secure_boot_keys_to_default", argsinfo: map[string]argInfo{}, requiresRamdisk: true,
		clean: true, deploy: true, has: hasKeyReset, run: resetKeysStep(driver.SecureBootKeysDefault)},
	{iface: "management", name: "clear_secure_boot_keys", argsinfo: map[string]argInfo{}, requiresRamdisk: true,
		clean: true, deploy: true, has: hasKeyReset, run: resetKeysStep(driver.SecureBootKeysDelete)},
	// idrac-redfish's own clean steps (Ironic's DracRedfishManagement;
	// priority 0, no ramdisk): clear the Lifecycle Controller job queue,
	// reset the iDRAC, or both (known_good_state: reset, then clear).
	{iface: "management", name: "clear_job_queue", argsinfo: map[string]argInfo{},
		clean: true, has: hasIDRACStep, run: idracStep(false, true)},
	{iface: "management", name: "reset_idrac", argsinfo: map[string]argInfo{},
		clean: true, has: hasIDRACStep, run: idracStep(true, false)},
	{iface: "management", name: "known_good_state", argsinfo: map[string]argInfo{},
		clean: true, has: hasIDRACStep, run: idracStep(true, true)},
}

// hasIDRACStep: the node's management interface is idrac-redfish and its
// driver can clear the job queue and reset the BMC.
func hasIDRACStep(hw *HardwareType, n *storage.Node) bool {
	if InterfaceOf(n, "management") != "idrac-redfish" {
		return false
	}
	_, ok1 := managementFeature[driver.BMCJobQueueClearer](n, hw)
	_, ok2 := managementFeature[driver.BMCResetter](n, hw)
	return ok1 && ok2
}

func idracStep(reset, clearQueue bool) stepFunc {
	return func(ctx context.Context, e *stepEnv) (stepResult, error) {
		if reset {
			r, _ := managementFeature[driver.BMCResetter](e.node, e.hw)
			if err := r.ResetBMC(ctx, e.dn); err != nil {
				return stepResult{}, err
			}
		}
		if clearQueue {
			c, _ := managementFeature[driver.BMCJobQueueClearer](e.node, e.hw)
			if err := c.ClearBMCJobQueue(ctx, e.dn); err != nil {
				return stepResult{}, err
			}
		}
		return stepResult{}, nil
	}
}

func hasKeyReset(hw *HardwareType, n *storage.Node) bool {
	_, ok := managementFeature[driver.SecureBootKeyResetter](n, hw)
	return ok
}

func resetKeysStep(how string) stepFunc {
	return func(ctx context.Context, e *stepEnv) (stepResult, error) {
		r, _ := managementFeature[driver.SecureBootKeyResetter](e.node, e.hw)
		if err := r.ResetSecureBootKeys(ctx, e.dn, how); err != nil {
			return stepResult{}, err
		}
		e.c.log.InfoContext(ctx, "secure boot keys reset", "node", e.node.UUID, "how", how)
		return stepResult{}, nil
	}
}

// secureBootRequested is Ironic's is_secure_boot_requested: the
// instance's capabilities (a dict, or "k:v,k:v") ask for secure_boot true.
func secureBootRequested(n *storage.Node) bool {
	switch caps := n.InstanceInfo["capabilities"].(type) {
	case map[string]any:
		return strings.EqualFold(fmt.Sprint(caps["secure_boot"]), "true")
	case string:
		for _, kv := range strings.Split(caps, ",") {
			k, v, _ := strings.Cut(strings.TrimSpace(kv), ":")
			if k == "secure_boot" {
				return strings.EqualFold(v, "true")
			}
		}
	}
	return false
}

// prepareInstanceSecureBoot is Ironic's configure_secure_boot_if_needed at
// the end of a deploy (the boot interface's prepare_instance): secure boot
// on before the instance boots, when its capabilities ask for it. A
// management interface without secure boot only gets a warning, as in
// Ironic. Nothing for other flows.
func (c *Conductor) prepareInstanceSecureBoot(ctx context.Context, hw *HardwareType, n *storage.Node, kind string) error {
	if kind != "deploy" || !secureBootRequested(n) {
		return nil
	}
	sb, ok := managementFeature[driver.SecureBootSetter](n, hw)
	if !ok {
		c.log.WarnContext(ctx, "secure boot was requested but the management interface does not support it", "node", n.UUID, "management", n.ManagementInterface)
		return nil
	}
	if err := sb.SetSecureBoot(ctx, driverNode(n), true); err != nil {
		if fault.Is(err, fault.Invalid) && strings.Contains(err.Error(), "does not support") {
			c.log.WarnContext(ctx, "secure boot was requested but the BMC does not support it", "node", n.UUID, "err", err)
			return nil
		}
		return fmt.Errorf("Failed to configure secure boot for node %s: %v", n.UUID, err)
	}
	c.log.InfoContext(ctx, "secure boot has been enabled", "node", n.UUID)
	return nil
}

// cleanUpInstanceSecureBoot is Ironic's deconfigure_secure_boot_if_needed
// at tear down: secure boot off again; an interface without it is fine.
func (c *Conductor) cleanUpInstanceSecureBoot(ctx context.Context, n *storage.Node) error {
	if !secureBootRequested(n) {
		return nil
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	sb, ok := managementFeature[driver.SecureBootSetter](n, hw)
	if !ok {
		return nil
	}
	if err := sb.SetSecureBoot(ctx, driverNode(n), false); err != nil {
		if fault.Is(err, fault.Invalid) && strings.Contains(err.Error(), "does not support") {
			return nil
		}
		return fmt.Errorf("Failed to deconfigure secure boot for node %s: %v", n.UUID, err)
	}
	c.log.InfoContext(ctx, "secure boot has been disabled", "node", n.UUID)
	return nil
}
