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

// ramdisklessTask is a manual clean (kind "clean") or a service (kind
// "service") with disable_ramdisk, as Ironic's do_node_clean and
// do_node_service run it: power validated (not the network), no
// prepare_cleaning/prepare_service (no boot device, no power on for an
// agent), the steps checked with disable_ramdisk (a step of the agent is
// "requires booting a ramdisk"), run out of band in order, and no tear
// down at the end: manageable after a clean, active after a service.
func ramdisklessTask(kind string, steps []map[string]any) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		verb, diiFlag, finish := "cleaning", diiCleaningDisableRamdisk, EvManage
		if kind == "service" {
			verb, diiFlag, finish = "service", diiServiceDisableRamdisk, EvDone
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
		if err := checkRamdisklessSteps(kind, steps); err != nil {
			what := "clean"
			if kind == "service" {
				what = "service"
			}
			return outcome{ev: EvFail, mutate: record, err: fmt.Errorf("Cannot %s node %s: %v", what, n.UUID, err)}
		}
		power := ""
		for _, s := range steps {
			target := flowSteps[s["step"].(string)]
			if err := hw.Power.SetPowerState(ctx, dn, target, c.cfg.PowerTimeout); err != nil {
				msg := fmt.Sprintf("Node %s failed step %s: %v", n.UUID, pyRepr(s), err)
				// Ironic's cleaning/servicing_error_handler: a failure
				// while a step runs puts the node in maintenance.
				fault := kind + " failure"
				return outcome{ev: EvFail, err: fmt.Errorf("%s", msg), mutate: func(n *storage.Node) {
					record(n)
					n.Maintenance = true
					n.Fault = &fault
					if n.MaintenanceReason == nil {
						n.MaintenanceReason = &msg
					}
				}}
			}
			power = driver.PowerOn
			if target == driver.PowerOff {
				power = driver.PowerOff
			}
			dn.PowerState = power
		}
		return outcome{ev: finish, mutate: func(n *storage.Node) {
			record(n)
			if power != "" {
				n.PowerState = &power
			}
			n.CleanStep = storage.JSONObject{}
			n.ServiceStep = storage.JSONObject{}
		}}
	}
}

// checkRamdisklessSteps is Ironic's _validate_user_steps with
// disable_ramdisk for castiron's steps: the conductor's flow steps pass,
// an agent step "requires booting a ramdisk", any other step is unknown to
// the node. hold and wait are flow steps in Ironic too; castiron does not
// run them yet, and says so.
func checkRamdisklessSteps(kind string, steps []map[string]any) error {
	var errs []string
	for _, s := range steps {
		iface, _ := s["interface"].(string)
		name, _ := s["step"].(string)
		switch {
		case flowSteps[name] != "":
		case name == "hold" || name == "wait":
			errs = append(errs, fmt.Sprintf("%s step %s is not supported by castiron without the ramdisk", kind, pyRepr(s)))
		case iface == agentStepInterface && isAgentStep(name):
			// castiron's agent steps are always known (Ironic's cached agent
			// steps), and none can run without the agent.
			errs = append(errs, fmt.Sprintf("%s step %s requires booting a ramdisk", kind, pyRepr(s)))
		default:
			errs = append(errs, fmt.Sprintf("node does not support this %s step: %s", kind, pyRepr(s)))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

func isAgentStep(name string) bool {
	_, ok := agentStepDefs[name]
	return ok
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
