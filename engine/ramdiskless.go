package engine

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"castiron/engine/driver"
	"castiron/storage"
)

// driver_internal_info keys Ironic sets when a manual clean or a service
// runs without the ramdisk (disable_ramdisk).
const (
	diiCleaningDisableRamdisk = "cleaning_disable_ramdisk"
	diiServiceDisableRamdisk  = "service_disable_ramdisk"
)

// flowSteps are the steps Ironic's conductor runs itself (its reserved
// step handlers) instead of an interface: they need no ramdisk.
var flowSteps = map[string]string{
	"power_on":  driver.PowerOn,
	"power_off": driver.PowerOff,
	"reboot":    driver.Rebooting,
}

// ramdiskless reports whether a clean or service runs without the
// ramdisk: disable_ramdisk asked for (by the body or the runbook) on a node
// whose steps would need the agent. Other nodes (the fake deploy
// interface) boot no ramdisk anyway and keep their task.
func ramdiskless(n *storage.Node, req ProvisionRequest) bool {
	return req.DisableRamdisk != nil && *req.DisableRamdisk && needsAgent(n, "deploy")
}

// flowStepTable are Ironic's reserved step handlers that castiron runs:
// power_on, power_off and reboot, of any interface, in any flow but
// deploy. lookupStep finds them by name.
var flowStepTable = []stepDef{}

// flowStep is the conductor step of a power flow step named name under
// the user's interface.
func flowStep(iface, name string) (stepDef, bool) {
	target, ok := flowSteps[name]
	if !ok {
		return stepDef{}, false
	}
	return stepDef{iface: iface, name: name, clean: true, service: true, flow: true,
		run: func(ctx context.Context, e *stepEnv) (stepResult, error) {
			if err := e.hw.Power.SetPowerState(ctx, e.dn, target, e.c.cfg.PowerTimeout); err != nil {
				return stepResult{}, err
			}
			power := driver.PowerOn
			if target == driver.PowerOff {
				power = driver.PowerOff
			}
			e.node.PowerState = &power
			return stepResult{}, e.c.saveNode(ctx, e.node, func(n *storage.Node) { n.PowerState = &power })
		}}, true
}

// ramdisklessTask is a manual clean (kind "clean") or a service (kind
// "service") with disable_ramdisk, as Ironic's do_node_clean and
// do_node_service run it: power validated (not the network), no
// prepare_cleaning/prepare_service (no boot device, no power on for an
// agent), the steps checked with disable_ramdisk (a step of the agent is
// "requires booting a ramdisk"), run by the conductor in order, and no
// tear down at the end: manageable after a clean, active after a service.
func ramdisklessTask(kind string, steps []map[string]any) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		verb, diiFlag := "cleaning", diiCleaningDisableRamdisk
		if kind == "service" {
			verb, diiFlag = "service", diiServiceDisableRamdisk
		}
		record := func(n *storage.Node) {
			n.DriverInternalInfo[kind+"_steps"] = steps
			n.DriverInternalInfo[diiFlag] = true
		}
		hw, err := c.hardwareOf(n)
		if err != nil {
			return failed(err)
		}
		dn := driverNode(n)
		if err := hw.Power.Validate(dn); err != nil {
			return outcome{ev: EvFail, mutate: record, err: fmt.Errorf("Validation of node %s for %s failed: %v", n.UUID, verb, err)}
		}
		plan, err := validateUserSteps(kind, hw, n, steps, true)
		if err != nil {
			return outcome{ev: EvFail, mutate: record, err: fmt.Errorf("Cannot %s node %s: %v", kind, n.UUID, err)}
		}
		if err := c.saveNode(ctx, n, func(n *storage.Node) {
			record(n)
			startSteps(n, plan)
		}); err != nil {
			return failed(err)
		}
		out := conductorSteps(kind, false)(ctx, c, n)
		inner := out.mutate
		out.mutate = func(n *storage.Node) {
			record(n)
			if inner != nil {
				inner(n)
			}
		}
		return out
	}
}

// pyRepr renders a user step as Ironic's messages show it (a Python dict
// repr), keys in the order a client sends them: interface, step, args,
// then the rest sorted. Hand-written: no library prints Python reprs.
func pyRepr(v any) string {
	switch t := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		rank := map[string]int{"interface": 0, "step": 1, "args": 2}
		sort.Slice(keys, func(i, j int) bool {
			ri, iok := rank[keys[i]]
			rj, jok := rank[keys[j]]
			switch {
			case iok && jok:
				return ri < rj
			case iok != jok:
				return iok
			}
			return keys[i] < keys[j]
		})
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyRepr(k) + ": " + pyRepr(t[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case string:
		return "'" + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), "'", `\'`) + "'"
	case bool:
		if t {
			return "True"
		}
		return "False"
	case nil:
		return "None"
	case float64:
		if t == float64(int64(t)) {
			return strconv.FormatInt(int64(t), 10)
		}
		return strconv.FormatFloat(t, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}
