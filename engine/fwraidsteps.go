package engine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"castiron/engine/driver"
	"castiron/storage"
)

// The firmware and raid interfaces' steps (Ironic's RedfishFirmware and
// RedfishRAID): they run in the conductor against the BMC, need no
// ramdisk, and cannot be aborted (Ironic: abortable=False).

var firmwareUpdateArgs = map[string]argInfo{
	"settings": {Description: "A list of dicts with firmware components to be updated", Required: true},
}

var raidCreateArgs = map[string]argInfo{
	"create_root_volume":     {Description: "This specifies whether to create the root volume. Defaults to `True`."},
	"create_nonroot_volumes": {Description: "This specifies whether to create the non-root volumes. Defaults to `True`."},
	"delete_existing":        {Description: "Setting this to `True` indicates to delete existing RAID configuration prior to creating the new configuration. Default value is `False`."},
}

// raidApplyArgs is Ironic's RAID_APPLY_CONFIGURATION_ARGSINFO.
var raidApplyArgs = map[string]argInfo{
	"raid_config":            {Description: "The RAID configuration to apply.", Required: true},
	"create_root_volume":     {Description: "Setting this to 'False' indicates not to create root volume that is specified in 'raid_config'. Default value is 'True'."},
	"create_nonroot_volumes": {Description: "Setting this to 'False' indicates not to create non-root volumes (all except the root volume) in 'raid_config'. Default value is 'True'."},
	"delete_existing":        {Description: "Setting this to 'True' indicates to delete existing RAID configuration prior to creating the new configuration. Default value is 'True'."},
}

var fwRAIDStepTable = []stepDef{
	{iface: "firmware", name: "update", argsinfo: firmwareUpdateArgs, clean: true, service: true, deploy: true, has: hasFirmware, run: firmwareUpdateStep},
	{iface: "raid", name: "create_configuration", argsinfo: raidCreateArgs, clean: true, has: hasHardwareRAID, run: raidCreateStep},
	{iface: "raid", name: "apply_configuration", argsinfo: raidApplyArgs, service: true, deploy: true, has: hasHardwareRAID, run: raidApplyStep},
	{iface: "raid", name: "delete_configuration", argsinfo: map[string]argInfo{}, clean: true, service: true, deploy: true, has: hasHardwareRAID, run: raidDeleteStep},
}

func hasFirmware(hw *HardwareType, n *storage.Node) bool {
	_, ok := hw.FirmwareOf(n)
	return ok
}

func hasHardwareRAID(hw *HardwareType, n *storage.Node) bool {
	_, ok := hw.RAIDOf(n)
	return ok
}

// step_state keys of firmware.update.
const (
	fsStaged   = "staged"   // [{component, url, path}] verified images
	fsIndex    = "index"    // the component being updated
	fsTask     = "task"     // its BMC task monitor
	fsRebooted = "rebooted" // the reboot its update needs was done
	fsWaitEnd  = "wait_until"
)

// firmwareUpdateStep is Ironic's RedfishFirmware.update: the images are
// downloaded and their checksums verified first (all of them, before the
// BMC gets any), then handed to the BMC one by one, each task polled until
// it ends (the step timeout bounds the whole step); a BIOS update, or a
// task that says a reset is required, reboots the node before the next.
// The components are cached at the end.
func firmwareUpdateStep(ctx context.Context, e *stepEnv) (stepResult, error) {
	fw, _ := e.hw.FirmwareOf(e.node)
	staged, _ := e.state[fsStaged].([]any)
	if staged == nil {
		ups, err := parseFirmwareSettings(e.args["settings"])
		if err != nil {
			return stepResult{}, err
		}
		// The downloads are bounded by the step timeout, as the BMC's
		// tasks are (an image server that hangs must not hold the node).
		sctx, cancel := context.WithTimeout(ctx, e.c.cfg.StepTimeout)
		defer cancel()
		for _, u := range ups {
			img, err := e.c.stageFirmware(sctx, e.node.UUID, u)
			if err != nil {
				removeStaged(staged)
				return stepResult{}, err
			}
			staged = append(staged, map[string]any{"component": u.Component, "url": img.url, "path": img.path, "size": img.size, "wait": u.Wait})
		}
		e.state[fsStaged] = staged
		e.state[fsIndex] = 0
	}
	fail := func(err error) (stepResult, error) {
		removeStaged(staged)
		return stepResult{}, err
	}
	i := intOf(e.state[fsIndex])
	for i < len(staged) {
		cur, _ := staged[i].(map[string]any)
		comp, _ := cur["component"].(string)
		task, _ := e.state[fsTask].(string)
		if task == "" {
			path, _ := cur["path"].(string)
			url, _ := cur["url"].(string)
			img := stagedImage{path: path, url: url, size: int64(intOf(cur["size"]))}
			t, err := fw.StartFirmwareUpdate(ctx, e.dn, driver.FirmwareImage{Component: comp, URL: url, Image: img.open})
			if err != nil {
				return fail(fmt.Errorf("Firmware update of %s on node %s failed: %w", comp, e.node.UUID, err))
			}
			e.state[fsTask] = t
			e.c.log.InfoContext(ctx, "firmware update started", "node", e.node.UUID, "component", comp, "task", t)
			return stepResult{poll: true, progress: fwProgress(comp, i, len(staged), -1, "update handed to the BMC")}, nil
		}
		if rebooted, _ := e.state[fsRebooted].(bool); !rebooted {
			st, err := fw.FirmwareTask(ctx, e.dn, task)
			if err != nil {
				// A BMC updating itself stops answering for a while: keep
				// polling; the step timeout ends a BMC that never returns.
				return stepResult{poll: true, progress: fwProgress(comp, i, len(staged), -1, "the BMC does not answer: "+err.Error())}, nil
			}
			if !st.Done {
				return stepResult{poll: true, progress: fwProgress(comp, i, len(staged), st.Percent, st.Message)}, nil
			}
			if st.Failed {
				return fail(fmt.Errorf("Firmware update of %s on node %s failed: the BMC's task %s ended in failure: %s", comp, e.node.UUID, task, st.Message))
			}
			e.c.log.InfoContext(ctx, "firmware update task done", "node", e.node.UUID, "component", comp, "reset_required", st.ResetRequired)
			if comp == driver.FirmwareBIOS || st.ResetRequired {
				e.state[fsRebooted] = true
				return stepResult{reboot: true, progress: fwProgress(comp, i, len(staged), 100, "rebooting to apply the update")}, nil
			}
		}
		// Ironic's per-component "wait": time for the BMC to settle
		// (it may restart itself after flashing) before going on.
		if w := intOf(cur["wait"]); w > 0 {
			until, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(e.state[fsWaitEnd]))
			if until.IsZero() {
				until = e.c.now().Add(time.Duration(w) * time.Second)
				e.state[fsWaitEnd] = until.Format(time.RFC3339Nano)
			}
			if e.c.now().Before(until) {
				return stepResult{poll: true, progress: fwProgress(comp, i, len(staged), 100, fmt.Sprintf("waiting %ds for the BMC to settle", w))}, nil
			}
		}
		i++
		e.state[fsIndex] = i
		delete(e.state, fsTask)
		delete(e.state, fsRebooted)
		delete(e.state, fsWaitEnd)
	}
	removeStaged(staged)
	e.c.cacheFirmware(ctx, e.hw, e.node)
	return stepResult{}, nil
}

func fwProgress(comp string, i, n, pct int, msg string) map[string]any {
	p := map[string]any{"component": comp, "component_index": i + 1, "components": n, "message": msg}
	if pct >= 0 {
		p["percent"] = pct
	}
	return p
}

func removeStaged(staged []any) {
	for _, s := range staged {
		m, _ := s.(map[string]any)
		if p, _ := m["path"].(string); p != "" {
			_ = os.Remove(p)
		}
	}
}

// boolArg reads a step's boolean argument (JSON true/false, or the
// strings clients send for them).
func boolArg(args map[string]any, name string, def bool) (bool, error) {
	switch v := args[name].(type) {
	case nil:
		return def, nil
	case bool:
		return v, nil
	case string:
		if b, err := strconv.ParseBool(v); err == nil {
			return b, nil
		}
	}
	return false, fmt.Errorf("%s must be a boolean, got %s", name, pyRepr(args[name]))
}

// raidBound bounds a synchronous RAID call (the BMC's volume tasks are
// polled inside it) by the step timeout.
func raidBound(ctx context.Context, e *stepEnv) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.c.cfg.StepTimeout)
}

// raidCreateStep is RedfishRAID.create_configuration: the volumes of
// target_raid_config (the root and/or the others), then raid_config read
// back from the BMC. delete_existing deletes the volumes first (Ironic's
// redfish code takes the argument and ignores it).
func raidCreateStep(ctx context.Context, e *stepEnv) (stepResult, error) {
	root, err := boolArg(e.args, "create_root_volume", true)
	if err != nil {
		return stepResult{}, err
	}
	nonRoot, err := boolArg(e.args, "create_nonroot_volumes", true)
	if err != nil {
		return stepResult{}, err
	}
	del, err := boolArg(e.args, "delete_existing", false)
	if err != nil {
		return stepResult{}, err
	}
	return createRAID(ctx, e, e.node.TargetRAIDConfig, root, nonRoot, del)
}

// raidApplyStep is RedfishRAID.apply_configuration (deploy and service):
// raid_config validated and stored as target_raid_config, then created.
func raidApplyStep(ctx context.Context, e *stepEnv) (stepResult, error) {
	cfg, ok := e.args["raid_config"].(map[string]any)
	if !ok {
		return stepResult{}, fmt.Errorf("raid_config must be an object, got %s", pyRepr(e.args["raid_config"]))
	}
	if err := ValidateRAIDConfig(cfg); err != nil {
		return stepResult{}, err
	}
	if err := e.c.validateHardwareRAID(e.node, cfg); err != nil {
		return stepResult{}, err
	}
	root, err := boolArg(e.args, "create_root_volume", true)
	if err != nil {
		return stepResult{}, err
	}
	nonRoot, err := boolArg(e.args, "create_nonroot_volumes", false)
	if err != nil {
		return stepResult{}, err
	}
	del, err := boolArg(e.args, "delete_existing", false)
	if err != nil {
		return stepResult{}, err
	}
	if err := e.c.saveNode(ctx, e.node, func(n *storage.Node) { n.TargetRAIDConfig = storage.JSONObject(cfg) }); err != nil {
		return stepResult{}, err
	}
	return createRAID(ctx, e, cfg, root, nonRoot, del)
}

func createRAID(ctx context.Context, e *stepEnv, target map[string]any, root, nonRoot, del bool) (stepResult, error) {
	r, _ := e.hw.RAIDOf(e.node)
	lds := asList(target["logical_disks"])
	if len(lds) == 0 {
		return stepResult{}, fmt.Errorf("Node %s has no target RAID configuration.", e.node.UUID)
	}
	var disks []map[string]any
	for _, d := range lds {
		m, _ := d.(map[string]any)
		disks = append(disks, m)
	}
	bctx, cancel := raidBound(ctx, e)
	defer cancel()
	if del {
		if err := r.DeleteRAIDConfiguration(bctx, e.dn); err != nil {
			return stepResult{}, raidError(e, "delete", err)
		}
	}
	if err := r.CreateRAIDConfiguration(bctx, e.dn, disks, root, nonRoot); err != nil {
		return stepResult{}, raidError(e, "create", err)
	}
	return recordRAID(bctx, e, r)
}

func raidDeleteStep(ctx context.Context, e *stepEnv) (stepResult, error) {
	r, _ := e.hw.RAIDOf(e.node)
	bctx, cancel := raidBound(ctx, e)
	defer cancel()
	if err := r.DeleteRAIDConfiguration(bctx, e.dn); err != nil {
		return stepResult{}, raidError(e, "delete", err)
	}
	return recordRAID(bctx, e, r)
}

func raidError(e *stepEnv, op string, err error) error {
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("Redfish RAID %s configuration on node %s did not finish within %s: %w", op, e.node.UUID, e.c.cfg.StepTimeout, err)
	}
	return fmt.Errorf("Redfish RAID %s configuration failed on node %s: %w", op, e.node.UUID, err)
}

// recordRAID reads the volumes back into raid_config (Ironic's
// update_raid_config).
func recordRAID(ctx context.Context, e *stepEnv, r driver.RAID) (stepResult, error) {
	lds, err := r.RAIDConfig(ctx, e.dn)
	if err != nil {
		return stepResult{}, fmt.Errorf("reading the RAID configuration of node %s back failed: %w", e.node.UUID, err)
	}
	now := e.c.now()
	if err := e.c.saveNode(ctx, e.node, func(n *storage.Node) { raidConfigOf(n, lds, now) }); err != nil {
		return stepResult{}, err
	}
	return stepResult{}, nil
}
