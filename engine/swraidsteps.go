package engine

import (
	"fmt"
	"maps"
	"strings"
	"time"

	"castiron/ramdisk/protocol"
	"castiron/ramdisk/swraid"
	"castiron/storage"
)

// The agent raid interface's steps (Ironic's AgentRAID): software RAID
// built by castiron's agent (ramdisk/swraid). They share their names with
// the hardware RAID steps (fwraidsteps.go); lookupStepFor picks the
// node's. The conductor's part (prepare) is Ironic's: the target config
// filtered and checked, sent to the agent in the step's arguments (the
// agent does not read the node); its result becomes raid_config (done,
// Ironic's post step hooks).

// agentRAIDCreateArgs are AgentRAID.create_configuration's arguments.
var agentRAIDCreateArgs = map[string]argInfo{
	"create_root_volume":     raidCreateArgs["create_root_volume"],
	"create_nonroot_volumes": raidCreateArgs["create_nonroot_volumes"],
}

// agentRAIDApplyArgs is Ironic's _RAID_APPLY_CONFIGURATION_ARGSINFO of
// the agent interface (and IPA's).
var agentRAIDApplyArgs = map[string]argInfo{
	"raid_config":     raidApplyArgs["raid_config"],
	"delete_existing": raidApplyArgs["delete_existing"],
}

var agentRAIDStepTable = []stepDef{
	{iface: protocol.StepRAIDInterface, name: protocol.StepRAIDCreate, argsinfo: agentRAIDCreateArgs, abortable: true, requiresRamdisk: true,
		clean: true, service: true, has: hasAgentRAID, prepare: prepareRAIDCreate, done: raidCreated},
	{iface: protocol.StepRAIDInterface, name: protocol.StepRAIDApply, argsinfo: agentRAIDApplyArgs, requiresRamdisk: true,
		deploy: true, service: true, has: hasAgentRAID, prepare: prepareRAIDApply, done: raidCreated},
	{iface: protocol.StepRAIDInterface, name: protocol.StepRAIDDelete, argsinfo: map[string]argInfo{}, abortable: true, requiresRamdisk: true,
		clean: true, service: true, has: hasAgentRAID, done: raidDeleted},
}

// hasAgentRAID: the node's raid interface is "agent" and its agent runs
// steps (an agent-driven deploy interface).
func hasAgentRAID(_ *HardwareType, n *storage.Node) bool {
	return n.RAIDInterface == "agent" && needsAgent(n, "deploy")
}

// prepareRAIDCreate is AgentRAID.create_configuration: the node's
// target_raid_config filtered by create_root_volume and
// create_nonroot_volumes (raid.filter_target_raid_config) and checked.
func prepareRAIDCreate(n *storage.Node, args map[string]any) (map[string]any, error) {
	root, err := boolArg(args, "create_root_volume", true)
	if err != nil {
		return nil, err
	}
	nonRoot, err := boolArg(args, "create_nonroot_volumes", true)
	if err != nil {
		return nil, err
	}
	cfg, err := filterTargetRAIDConfig(n, root, nonRoot)
	if err != nil {
		return nil, err
	}
	if err := checkSoftwareRAID(n, cfg); err != nil {
		return nil, err
	}
	out := maps.Clone(args)
	if out == nil {
		out = map[string]any{}
	}
	out[protocol.ArgTargetRAIDConfig] = cfg
	out[protocol.ArgNodeUUID] = n.UUID
	return out, nil
}

// prepareRAIDApply is AgentRAID.apply_configuration: raid_config checked;
// delete_existing defaults to true.
func prepareRAIDApply(n *storage.Node, args map[string]any) (map[string]any, error) {
	cfg, ok := args["raid_config"].(map[string]any)
	if !ok {
		return nil, fmt.Errorf("raid_config must be an object, got %s", pyRepr(args["raid_config"]))
	}
	del, err := boolArg(args, "delete_existing", true)
	if err != nil {
		return nil, err
	}
	if err := checkSoftwareRAID(n, cfg); err != nil {
		return nil, err
	}
	return map[string]any{protocol.ArgTargetRAIDConfig: cfg, protocol.ArgDeleteExisting: del, protocol.ArgNodeUUID: n.UUID}, nil
}

// checkSoftwareRAID: Ironic's schema, then the software RAID rules IPA
// applies (checked here too, so a bad configuration fails before the
// agent touches a disk). castiron's agent builds software RAID only.
func checkSoftwareRAID(n *storage.Node, cfg map[string]any) error {
	if err := ValidateRAIDConfig(cfg); err != nil {
		return err
	}
	if !swraid.IsSoftware(cfg) {
		return fmt.Errorf("the agent raid interface of castiron builds software RAID only: give the logical disks \"controller\": \"software\" (hardware RAID is the redfish or idrac-redfish raid interface)")
	}
	return swraid.Validate(cfg, n.UUID)
}

// filterTargetRAIDConfig is Ironic's raid.filter_target_raid_config.
func filterTargetRAIDConfig(n *storage.Node, root, nonRoot bool) (map[string]any, error) {
	if len(n.TargetRAIDConfig) == 0 {
		return nil, fmt.Errorf("Node %s has no target RAID configuration.", n.UUID)
	}
	cfg := maps.Clone(map[string]any(n.TargetRAIDConfig))
	lds := asList(cfg["logical_disks"])
	var skipped []string
	keep := func(wantRoot bool) {
		var out []any
		for _, d := range lds {
			m, _ := d.(map[string]any)
			if r, _ := m["is_root_volume"].(bool); r == wantRoot {
				out = append(out, d)
			}
		}
		lds = out
	}
	if !root {
		keep(false)
		skipped = append(skipped, "skipping root volume")
	}
	if !nonRoot {
		keep(true)
		skipped = append(skipped, "skipping non-root volumes")
	}
	if len(lds) == 0 {
		return nil, fmt.Errorf("Node %s has empty target RAID configuration after %s.", n.UUID, strings.Join(skipped, " and "))
	}
	cfg["logical_disks"] = lds
	return cfg, nil
}

// raidCreated is AgentRAID._create_configuration_final and Ironic's
// raid.update_raid_info: the agent's result is the raid_config
// (last_updated stamped); its root volume sets local_gb (unless MAX),
// root_device (its root_device_hint: the md array) and the raid_level
// capability.
func raidCreated(n *storage.Node, result map[string]any, now time.Time) error {
	lds := asList(result["logical_disks"])
	if len(lds) == 0 {
		return fmt.Errorf("Agent ramdisk didn't return a proper command result while building RAID on %s. It returned '%s' after command execution.", n.UUID, pyRepr(result))
	}
	var rootLD map[string]any
	roots := 0
	for _, d := range lds {
		if m, _ := d.(map[string]any); m != nil {
			if r, _ := m["is_root_volume"].(bool); r {
				roots++
				rootLD = m
			}
		}
	}
	if roots > 1 {
		return fmt.Errorf("Raid config cannot have more than one root volume. %d root volumes were specified", roots)
	}
	cfg := storage.JSONObject{}
	maps.Copy(cfg, result)
	cfg["last_updated"] = now.UTC().Format("2006-01-02 15:04:05.000000")
	n.RAIDConfig = cfg
	if rootLD == nil {
		return nil
	}
	if n.Properties == nil {
		n.Properties = storage.JSONObject{}
	}
	if size, ok := rootLD["size_gb"].(float64); ok {
		n.Properties["local_gb"] = int(size)
	}
	if hint, ok := rootLD["root_device_hint"]; ok {
		n.Properties["root_device"] = hint
		// apply_configuration in a deploy: the write_image planned after
		// it goes to the new root array (IPA: the RAID root volume wins
		// over root device hints).
		steps, idx := stepsOf(n)
		for _, st := range steps[min(idx+1, len(steps)):] {
			if st["interface"] == agentStepInterface && st["step"] == protocol.StepWriteImage {
				if args, _ := st["args"].(map[string]any); args != nil {
					args[protocol.ArgRootDevice] = hint
				}
			}
		}
	}
	level := fmt.Sprint(rootLD["raid_level"])
	caps, _ := n.Properties["capabilities"].(string)
	switch {
	case strings.Contains(caps, "raid_level:"):
		caps = replaceCapability(caps, "raid_level", level)
	case caps != "":
		caps += ",raid_level:" + level
	default:
		caps = "raid_level:" + level
	}
	n.Properties["capabilities"] = caps
	return nil
}

// raidDeleted is AgentRAID._delete_configuration_final: root_device
// dropped, raid_config emptied.
func raidDeleted(n *storage.Node, _ map[string]any, _ time.Time) error {
	delete(n.Properties, "root_device")
	n.RAIDConfig = storage.JSONObject{}
	return nil
}
