package engine

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/ramdisk/configdrive"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// driver_internal_info keys of the step run the agent is working through.
const (
	diiSteps        = "agent_steps"         // the steps of this clean/deploy, in order
	diiStepIndex    = "agent_step_index"    // index of the current step
	diiStepProgress = "agent_step_progress" // the agent's last progress report
	diiStepResults  = "agent_step_results"  // results of finished steps
	diiAbortAfter   = "abort_after_step"
)

// agentStepInterface is the interface castiron's agent steps belong to.
const agentStepInterface = "deploy"

// agentStepTable is castiron's agent's part of the step table: Ironic's
// priorities for automated cleaning and whether they may be interrupted.
// Their arguments are the agent's (not checked here).
var agentStepTable = []stepDef{
	// erase_devices_metadata is also a deploy step (priority 0: only when
	// asked), as the agent offers it (a custom-agent deploy's user step).
	{iface: agentStepInterface, name: protocol.StepEraseDevicesMetadata, priority: 99, abortable: true, requiresRamdisk: true, clean: true, service: true, deploy: true, has: agentDeploy},
	{iface: agentStepInterface, name: protocol.StepEraseDevices, priority: 10, abortable: true, requiresRamdisk: true, clean: true, service: true, has: agentDeploy},
	{iface: agentStepInterface, name: protocol.StepWriteImage, priority: 80, abortable: true, requiresRamdisk: true, has: agentDeploy},
}

// agentDeploy: the agent's steps are the agent-driven deploy interfaces'.
func agentDeploy(_ *HardwareType, n *storage.Node) bool { return needsAgent(n, "deploy") }

func newStep(name string, args map[string]any) map[string]any {
	d, _ := lookupStep(agentStepInterface, name)
	return newStepFrom(d, args, d.priority)
}

// cleanSteps is the step list of a cleaning: automated (the steps of
// non-zero priority the node has, highest first: the agent's metadata
// erase, a full erase when configured, conductor steps that ask for it) or
// the operator's manual steps, checked against the step table.
func (c *Conductor) cleanSteps(n *storage.Node, manual bool, user []map[string]any) ([]any, error) {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return nil, err
	}
	if manual {
		plan, err := validateUserSteps("clean", hw, n, user, false)
		if err != nil {
			return nil, fmt.Errorf("Cannot clean node %s: %v", n.UUID, err)
		}
		return plan, nil
	}
	var defs []stepDef
	for _, d := range stepTable() {
		if d.priority <= 0 || !d.offers("clean", hw, n) {
			continue
		}
		if d.iface == agentStepInterface && d.name == protocol.StepEraseDevices && !c.cfg.CleanFullErase {
			continue
		}
		defs = append(defs, d)
	}
	sort.SliceStable(defs, func(i, j int) bool { return defs[i].priority > defs[j].priority })
	steps := make([]any, 0, len(defs))
	for _, d := range defs {
		var args map[string]any
		if d.iface == agentStepInterface && d.name == protocol.StepEraseDevices {
			args = map[string]any{protocol.ArgEraseFullPass: true}
		}
		steps = append(steps, newStepFrom(d, args, d.priority))
	}
	return steps, nil
}

// deploySteps is the step list of a deployment: write the image (with its
// checksum, the root device hints and the config drive) to the root disk,
// with the user's deploy steps (deploy_steps of the request, then the
// steps of the deploy templates named by instance_info/traits) around it
// by priority, highest first, as Ironic orders them.
func (c *Conductor) deploySteps(ctx context.Context, n *storage.Node) ([]any, error) {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return nil, err
	}
	var userSteps []map[string]any
	switch user := n.DriverInternalInfo["user_deploy_steps"].(type) {
	case []map[string]any:
		userSteps = user
	case []any:
		for _, s := range user {
			if m, ok := s.(map[string]any); ok {
				userSteps = append(userSteps, m)
			}
		}
	}
	tmpl, err := c.templateSteps(ctx, n)
	if err != nil {
		return nil, err
	}
	userSteps = append(slices.Clone(userSteps), tmpl...)
	seen := map[string]int{}
	var dups []string
	for _, s := range userSteps {
		k := fmt.Sprintf("%v.%v", s["interface"], s["step"])
		if seen[k]++; seen[k] == 2 {
			dups = append(dups, k)
		}
	}
	if len(dups) > 0 {
		return nil, fmt.Errorf("deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. Duplicate deploy steps for %s", strings.Join(dups, ", "))
	}
	extra, err := validateUserSteps("deploy", hw, n, userSteps, false)
	if err != nil {
		return nil, err
	}
	plan := extra
	if !customAgentDeploy(n) {
		// custom-agent: the user's steps only, no image written.
		write, err := c.writeImageStep(n)
		if err != nil {
			return nil, err
		}
		plan = append([]any{write}, extra...)
	}
	sort.SliceStable(plan, func(i, j int) bool {
		return intOf(plan[i].(map[string]any)["priority"]) > intOf(plan[j].(map[string]any)["priority"])
	})
	return plan, nil
}

// templateSteps are the steps of the deploy templates whose names are in
// instance_info/traits (Ironic's get_deployment_templates); a trait that
// names no template adds nothing.
func (c *Conductor) templateSteps(ctx context.Context, n *storage.Node) ([]map[string]any, error) {
	traits, _ := n.InstanceInfo["traits"].([]any)
	var out []map[string]any
	for _, tr := range traits {
		name, ok := tr.(string)
		if !ok {
			continue
		}
		t, err := c.store.GetDeployTemplate(ctx, name)
		if fault.Is(err, fault.NotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, s := range t.Steps {
			out = append(out, map[string]any{"interface": s.Interface, "step": s.Step, "args": map[string]any(s.Args), "priority": s.Priority})
		}
	}
	return out, nil
}

// writeImageStep is the agent's write_image step of a deployment.
func (c *Conductor) writeImageStep(n *storage.Node) (map[string]any, error) {
	ii := n.InstanceInfo
	src, _ := ii["image_source"].(string)
	imageURL, err := c.imageURL(src)
	if err != nil {
		return nil, err
	}
	args := map[string]any{protocol.ArgImageURL: imageURL}
	algo, _ := ii["image_os_hash_algo"].(string)
	sum, _ := ii["image_os_hash_value"].(string)
	if sum == "" {
		sum, _ = ii["image_checksum"].(string)
	}
	if sum != "" {
		if algo == "" {
			switch len(sum) {
			case 64:
				algo = "sha256"
			case 128:
				algo = "sha512"
			case 32:
				return nil, fmt.Errorf("Image checksum %s looks like MD5, which is not allowed; use image_os_hash_algo sha256 or sha512", sum)
			}
		}
		args[protocol.ArgImageChecksum] = strings.ToLower(sum)
		args[protocol.ArgImageHashAlgo] = algo
	}
	if f, _ := ii["image_disk_format"].(string); f != "" {
		args[protocol.ArgImageFormat] = f
	}
	// Ironic: instance_info.root_device wins over properties.root_device.
	if hints, ok := ii["root_device"].(map[string]any); ok {
		args[protocol.ArgRootDevice] = hints
	} else if hints, ok := n.Properties["root_device"].(map[string]any); ok {
		args[protocol.ArgRootDevice] = hints
	}
	if cd := ii["configdrive"]; cd != nil || len(n.NetworkData) > 0 {
		enc, err := configDriveArg(n, cd)
		if err != nil {
			return nil, err
		}
		args[protocol.ArgConfigDrive] = enc
	}
	return newStep(protocol.StepWriteImage, args), nil
}

// imageURL resolves image_source: an http(s) URL as is; a bare name (or
// castiron:///name) is an image castiron hosts under its data dir, so edge
// nodes never pull from the WAN.
func (c *Conductor) imageURL(src string) (string, error) {
	if src == "" {
		return "", fmt.Errorf("instance_info.image_source is required")
	}
	u, err := url.Parse(src)
	if err != nil {
		return "", fmt.Errorf("Invalid image_source %q: %v", src, err)
	}
	switch u.Scheme {
	case "http", "https":
		return src, nil
	case "", "castiron":
		name := strings.TrimPrefix(u.Path, "/")
		if name == "" || strings.Contains(name, "..") || c.cfg.ImageBaseURL == "" {
			return "", fmt.Errorf("Invalid image_source %q: not an http(s) URL nor an image castiron hosts", src)
		}
		return strings.TrimSuffix(c.cfg.ImageBaseURL, "/") + "/" + url.PathEscape(name), nil
	}
	return "", fmt.Errorf("Invalid image_source %q: scheme %q is not supported (http, https, or an image name under castiron's images)", src, u.Scheme)
}

// configDriveArg turns Ironic's configdrive (a JSON object, or a string that
// is a gzip+base64 image or a URL) into what the agent writes. The node's
// network_data goes into a JSON config drive that has none (Ironic's
// check_and_fix_configdrive, with the node's network_data standing for
// what Ironic generates from Neutron), and into a config drive of its own
// when the deploy gave none (a node without DHCP needs it to come up
// after the deploy; Ironic leaves that as a possible extension).
func configDriveArg(n *storage.Node, v any) (string, error) {
	cd, err := configdrive.Parse(v)
	if err != nil {
		return "", err
	}
	if len(n.NetworkData) > 0 {
		switch {
		case cd.Contents != nil && emptyNetworkData(cd.Contents.NetworkData):
			cd.Contents.NetworkData = n.NetworkData
		case cd.Contents == nil && cd.URL == "" && cd.Image == "":
			cd.Contents = &configdrive.Contents{NetworkData: n.NetworkData}
		}
	}
	name := ""
	if n.Name != nil {
		name = *n.Name
	}
	return cd.AgentArg(n.UUID, name)
}

// emptyNetworkData is Ironic's is_invalid_network_metadata without its MTU
// check: no links, networks nor services.
func emptyNetworkData(nd map[string]any) bool {
	for _, k := range []string{"links", "networks", "services"} {
		if l, ok := nd[k].([]any); ok && len(l) > 0 {
			return false
		}
	}
	return true
}

// startSteps records steps as the node's agent work plan.
func startSteps(n *storage.Node, steps []any) {
	n.DriverInternalInfo[diiSteps] = steps
	n.DriverInternalInfo[diiStepIndex] = 0
	delete(n.DriverInternalInfo, diiStepProgress)
	delete(n.DriverInternalInfo, diiStepResults)
	delete(n.DriverInternalInfo, diiAbortAfter)
}

// clearSteps forgets the plan when the operation ends.
func clearSteps(n *storage.Node) {
	for _, k := range []string{diiSteps, diiStepIndex, diiStepProgress, diiAbortAfter, diiStepState, diiStepStarted, diiStepReboot} {
		delete(n.DriverInternalInfo, k)
	}
	n.CleanStep = storage.JSONObject{}
	n.DeployStep = storage.JSONObject{}
	n.ServiceStep = storage.JSONObject{}
}

func stepsOf(n *storage.Node) ([]map[string]any, int) {
	raw, _ := n.DriverInternalInfo[diiSteps].([]any)
	steps := make([]map[string]any, 0, len(raw))
	for _, s := range raw {
		if m, ok := s.(map[string]any); ok {
			steps = append(steps, m)
		}
	}
	idx := 0
	switch v := n.DriverInternalInfo[diiStepIndex].(type) {
	case float64:
		idx = int(v)
	case int:
		idx = v
	}
	return steps, idx
}

// setCurrentStep shows step in clean_step or deploy_step, as Ironic does
// (without castiron's step id).
func setCurrentStep(n *storage.Node, step map[string]any, progress map[string]any) {
	view := storage.JSONObject{}
	for k, v := range step {
		if k != "id" {
			view[k] = v
		}
	}
	if progress != nil {
		view["progress"] = progress
	}
	switch kindOf(State(n.ProvisionState)) {
	case "deploy":
		n.DeployStep = view
	case "service":
		n.ServiceStep = view
	default:
		n.CleanStep = view
	}
}

func protocolStep(m map[string]any) *protocol.Step {
	s := &protocol.Step{}
	s.ID, _ = m["id"].(string)
	s.Interface, _ = m["interface"].(string)
	s.Name, _ = m["step"].(string)
	s.Args, _ = m["args"].(map[string]any)
	s.Abortable, _ = m["abortable"].(bool)
	return s
}

// finishAgentWork is the task that ends a clean, service or deploy after
// the plan's last step: wait for the ramdisk to power the machine off (it
// syncs first), force it off if it does not, and for a deploy or a service
// boot the disk (a deploy asking for secure boot gets it first).
func finishAgentWork(kind string, manualClean bool) work {
	deploy := kind == "deploy" || kind == "service"
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		if n.DisablePowerOff {
			return finishInPlace(ctx, c, n, deploy, manualClean)
		}
		if err := c.waitPoweredOff(ctx, n); err != nil {
			c.endRamdisk(ctx, n)
			return failed(fmt.Errorf("Failed to power off the node after its agent finished: %v", err))
		}
		c.endRamdisk(ctx, n)
		mutate := func(n *storage.Node) {
			clearSteps(n)
			wipeToken(n)
			off := driver.PowerOff
			n.PowerState = &off
		}
		if !deploy {
			c.cacheBIOSQuietly(ctx, n) // Ironic's node_update_cache as cleaning ends
			ev := EvDone
			if manualClean {
				ev = EvManage
			}
			return outcome{ev: ev, mutate: mutate}
		}
		if ramdiskDeploy(n) {
			// Ironic's tear_down_service: the boot interface's
			// prepare_instance again, the instance is the ramdisk.
			if err := c.bootRamdiskInstance(ctx, n); err != nil {
				return failed(err)
			}
			return outcome{ev: EvDone, mutate: func(n *storage.Node) {
				mutate(n)
				on := driver.PowerOn
				n.PowerState = &on
			}}
		}
		hw, err := c.hardwareOf(n)
		if err != nil {
			return failed(err)
		}
		dn := driverNode(n)
		dn.PowerState = driver.PowerOff
		if err := c.prepareInstanceSecureBoot(ctx, hw, n, kind); err != nil {
			return failed(err)
		}
		if err := hw.Management.SetBootDevice(ctx, dn, driver.BootDisk, true); err != nil {
			return failed(fmt.Errorf("Failed to set the boot device to disk: %v", err))
		}
		if err := hw.Power.SetPowerState(ctx, dn, driver.PowerOn, c.cfg.PowerTimeout); err != nil {
			return failed(fmt.Errorf("Failed to power on the deployed node: %v", err))
		}
		return outcome{ev: EvDone, mutate: func(n *storage.Node) {
			mutate(n)
			on := driver.PowerOn
			n.PowerState = &on
		}}
	}
}

// finishInPlace is finishAgentWork for a node that must never be powered
// off (disable_power_off): Ironic's tear_down_cleaning and
// reboot_to_instance reboot such a node instead of powering it off and on.
// The boot device goes to disk first for a deploy; the driver resets the
// node in place (driver.Node.DisablePowerOff).
func finishInPlace(ctx context.Context, c *Conductor, n *storage.Node, deploy, manualClean bool) outcome {
	kind := "clean"
	if deploy {
		kind = kindOf(State(n.ProvisionState))
	}
	c.endRamdisk(ctx, n)
	if deploy && ramdiskDeploy(n) {
		// The ramdisk instance again (a reset in place: DisablePowerOff).
		if err := c.bootRamdiskInstance(ctx, n); err != nil {
			return failed(err)
		}
		return outcome{ev: EvDone, mutate: func(n *storage.Node) {
			clearSteps(n)
			wipeToken(n)
			on := driver.PowerOn
			n.PowerState = &on
		}}
	}
	hw, err := c.hardwareOf(n)
	if err != nil {
		return failed(err)
	}
	dn := driverNode(n)
	if deploy {
		if err := c.prepareInstanceSecureBoot(ctx, hw, n, kind); err != nil {
			return failed(err)
		}
		if err := hw.Management.SetBootDevice(ctx, dn, driver.BootDisk, true); err != nil {
			return failed(fmt.Errorf("Failed to set the boot device to disk: %v", err))
		}
	}
	if err := hw.Power.SetPowerState(ctx, dn, driver.Rebooting, c.cfg.PowerTimeout); err != nil {
		return failed(fmt.Errorf("Failed to reboot the node after its agent finished: %v", err))
	}
	ev := EvDone
	if !deploy && manualClean {
		ev = EvManage
	}
	return outcome{ev: ev, mutate: func(n *storage.Node) {
		clearSteps(n)
		wipeToken(n)
		on := driver.PowerOn
		n.PowerState = &on
	}}
}
