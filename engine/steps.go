package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"castiron/engine/driver"
	"castiron/storage"
)

// Steps are one plan whatever runs them (ARCHITECTURE.md): clean
// (automated and manual), service and deploy steps and runbooks make one
// ordered list in driver_internal_info; each step runs where its interface
// lives. Agent steps (stepDef.run nil) go to castiron's agent on its next
// heartbeat; conductor steps (bios, raid, firmware, management, the flow
// steps) run in a conductor task calling the node's driver. The engine
// hands over between the two as Ironic's step runner does: a conductor
// step met at a heartbeat takes the node back (… wait -> …ing), runs, and
// the node returns to … wait for the agent's next step.

// argInfo is one entry of a step's argsinfo (Ironic's).
type argInfo struct {
	Description string
	Required    bool
}

// stepDef is one step castiron knows, Ironic's step decorators in a row.
type stepDef struct {
	iface, name string
	// priority is the step's priority in automated cleaning (0: run only
	// when asked for); deploy steps are ordered by the user's priority.
	priority  int
	abortable bool
	// argsinfo lists the step's arguments; nil: not checked (the agent's
	// steps, whose arguments the agent defines).
	argsinfo        map[string]argInfo
	requiresRamdisk bool
	// clean, service, deploy: the flows that offer the step.
	clean, service, deploy bool
	// has reports whether the node's interface implementation has the
	// step; nil: always.
	has func(hw *HardwareType, n *storage.Node) bool
	// run executes a conductor step; nil: castiron's agent runs it.
	run stepFunc
	// flow marks Ironic's reserved flow steps (power_on, …): the node
	// shows them as the user gave them.
	flow bool
	// prepare (agent steps) is the conductor's part before the agent gets
	// the step (Ironic's interface method that calls execute_step): it
	// checks and returns the arguments the agent gets; an error fails the
	// step without the agent.
	prepare func(n *storage.Node, args map[string]any) (map[string]any, error)
	// done (agent steps) is Ironic's post step hook: it takes the agent's
	// result into the node; an error fails the step.
	done func(n *storage.Node, result map[string]any, now time.Time) error
}

// stepTable is every step, one table made of each interface's part
// (agentsteps.go, biossteps.go, managementsteps.go, …). Adding an
// interface's steps (raid, firmware): its driver interface in
// engine/driver, a map of implementations on HardwareType (as BIOS) with
// a has func finding the node's, a part listing the steps with Ironic's
// decorator values and a stepFunc each (stepResult.reboot for a step that
// needs a reboot, poll for a BMC task; state survives both), and the part
// added here.
func stepTable() []stepDef {
	return slices.Concat(agentStepTable, flowStepTable, biosStepTable, managementStepTable, fwRAIDStepTable, agentRAIDStepTable)
}

// stepIndex is stepTable by "interface.step", built once at init. A name
// may have one definition per interface implementation (the redfish and
// the agent raid interfaces both have raid.create_configuration), each
// with a has func telling whose it is.
var stepIndex = func() map[string][]stepDef {
	m := map[string][]stepDef{}
	for _, d := range stepTable() {
		k := d.iface + "." + d.name
		for _, prev := range m[k] {
			if prev.has == nil || d.has == nil {
				panic("step table: duplicate step " + k)
			}
		}
		m[k] = append(m[k], d)
	}
	return m
}()

func lookupStep(iface, name string) (stepDef, bool) {
	if ds := stepIndex[iface+"."+name]; len(ds) > 0 {
		return ds[0], true
	}
	return flowStep(iface, name)
}

// lookupStepFor is lookupStep for a node: of the definitions of a name,
// the node's interface implementation's.
func lookupStepFor(hw *HardwareType, n *storage.Node, iface, name string) (stepDef, bool) {
	for _, d := range stepIndex[iface+"."+name] {
		if hw != nil && (d.has == nil || d.has(hw, n)) {
			return d, true
		}
	}
	return lookupStep(iface, name)
}

// offers reports whether d is a step of kind ("clean", "service",
// "deploy") for n.
func (d stepDef) offers(kind string, hw *HardwareType, n *storage.Node) bool {
	switch {
	case kind == "clean" && !d.clean, kind == "service" && !d.service, kind == "deploy" && !d.deploy:
		return false
	}
	return d.has == nil || d.has(hw, n)
}

// stepEnv is what a conductor step works with.
type stepEnv struct {
	c    *Conductor
	hw   *HardwareType
	node *storage.Node
	dn   driver.Node
	kind string // "clean", "service", "deploy"
	args map[string]any
	// state is the step's memory across its calls (after a reboot,
	// between polls), kept in driver_internal_info; the step changes it in
	// place.
	state map[string]any
	// ramdisk: the agent is up and comes back after a reboot.
	ramdisk bool
}

// stepResult is how a conductor step call ended, when it did not fail.
type stepResult struct {
	// reboot: reboot the node and call the step again once it is back
	// (Ironic's reboot_requested): with the ramdisk at the agent's next
	// heartbeat, without it at once.
	reboot bool
	// poll: the step is waiting for the BMC (a job, settings applied);
	// call it again after the poll interval, within the step timeout.
	poll bool
	// progress is shown in the node's clean_step/deploy_step/service_step.
	progress map[string]any
	// result is kept with the step's results.
	result any
}

type stepFunc func(ctx context.Context, e *stepEnv) (stepResult, error)

// driver_internal_info keys of a conductor step's run.
const (
	diiStepState   = "step_state"   // the running conductor step's own state
	diiStepStarted = "step_started" // when it began waiting (polls)
	diiStepReboot  = "step_reboot_requested"
)

func newStepFrom(d stepDef, args map[string]any, priority int) map[string]any {
	if args == nil {
		args = map[string]any{}
	}
	return map[string]any{
		"id": uuid.NewString(), "interface": d.iface, "step": d.name,
		"args": args, "priority": priority, "abortable": d.abortable,
	}
}

// kindOf is the step flow of a node's state.
func kindOf(st State) string {
	switch st {
	case Deploying, DeployWait, DeployHold, DeployFail:
		return "deploy"
	case Servicing, ServiceWait, ServiceHold, ServiceFail:
		return "service"
	}
	return "clean"
}

// validateUserSteps is Ironic's _validate_user_steps for castiron's step
// table: each step known to the node, its arguments against argsinfo,
// (disableRamdisk) none needing the agent. It returns the plan: the steps
// in the user's order (clean, service) with the table's priority and
// abortable, or (deploy) with the user's priority.
func validateUserSteps(kind string, hw *HardwareType, n *storage.Node, user []map[string]any, disableRamdisk bool) ([]any, error) {
	var errs []string
	var plan []any
	for _, s := range user {
		iface, _ := s["interface"].(string)
		name, _ := s["step"].(string)
		d, ok := lookupStepFor(hw, n, iface, name)
		if !ok || !d.offers(kind, hw, n) {
			if (name == "hold" || name == "wait") && kind != "deploy" {
				errs = append(errs, fmt.Sprintf("%s step %s is not supported by castiron%s", kind, pyRepr(s),
					map[bool]string{true: " without the ramdisk"}[disableRamdisk]))
				continue
			}
			errs = append(errs, fmt.Sprintf("node does not support this %s step: %s", kind, pyRepr(s)))
			continue
		}
		if d.flow {
			step := map[string]any{"id": uuid.NewString()}
			for k, v := range s {
				step[k] = v
			}
			plan = append(plan, step)
			continue
		}
		args, _ := s["args"].(map[string]any)
		prio := d.priority
		if kind == "deploy" {
			prio = intOf(s["priority"])
		}
		if d.argsinfo != nil {
			var unexpected []string
			for a := range args {
				if _, ok := d.argsinfo[a]; !ok {
					unexpected = append(unexpected, a)
				}
			}
			sort.Strings(unexpected)
			if len(unexpected) > 0 {
				errs = append(errs, fmt.Sprintf("%s step %s has these unexpected arguments: %s", kind, pyRepr(s), strings.Join(unexpected, ", ")))
			}
		}
		if kind != "deploy" || prio > 0 {
			var missing []string
			names := make([]string, 0, len(d.argsinfo))
			for a := range d.argsinfo {
				names = append(names, a)
			}
			sort.Strings(names)
			for _, a := range names {
				info := d.argsinfo[a]
				if _, ok := args[a]; info.Required && !ok {
					m := a
					if info.Description != "" {
						m += " (" + info.Description + ")"
					}
					missing = append(missing, m)
				}
			}
			if len(missing) > 0 {
				errs = append(errs, fmt.Sprintf("%s step %s is missing these required arguments: %s", kind, pyRepr(s), strings.Join(missing, ", ")))
			}
			if disableRamdisk && d.requiresRamdisk {
				errs = append(errs, fmt.Sprintf("%s step %s requires booting a ramdisk", kind, pyRepr(s)))
			}
		}
		if kind == "deploy" && prio == 0 {
			continue // a deploy step of priority 0 is disabled
		}
		plan = append(plan, newStepFrom(d, args, prio))
	}
	if len(errs) > 0 {
		return nil, errors.New(strings.Join(errs, "; "))
	}
	return plan, nil
}

func intOf(v any) int {
	switch t := v.(type) {
	case float64:
		return int(t)
	case int:
		return t
	case int64:
		return int(t)
	case string:
		var i int
		fmt.Sscan(t, &i)
		return i
	}
	return 0
}

// isConductorStep reports whether a plan step runs in the conductor.
func isConductorStep(hw *HardwareType, n *storage.Node, step map[string]any) bool {
	iface, _ := step["interface"].(string)
	name, _ := step["step"].(string)
	d, ok := lookupStepFor(hw, n, iface, name)
	return ok && d.run != nil
}

// stepFailure is the last_error of a conductor step that failed, in
// Ironic's words for the flow.
func stepFailure(kind string, n *storage.Node, step map[string]any, err error) string {
	var se *stepError
	if errors.As(err, &se) {
		return se.lastError
	}
	if kind == "deploy" {
		msg := strings.TrimSuffix(err.Error(), ".")
		return fmt.Sprintf("Deploy step %s failed: %s.", stepLabel(step), msg)
	}
	return fmt.Sprintf("Node %s failed step %s: %v", n.UUID, pyRepr(stepView(step)), err)
}

// stepView is a plan step as the node shows it (no castiron id).
func stepView(step map[string]any) map[string]any {
	v := map[string]any{}
	for k, x := range step {
		if k != "id" {
			v[k] = x
		}
	}
	return v
}

// saveNode applies mutate to the task's copy of n and to the stored node
// (the task holds the reservation, so nobody else writes it meanwhile).
func (c *Conductor) saveNode(ctx context.Context, n *storage.Node, mutate func(*storage.Node)) error {
	mutate(n)
	_, err := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		mutate(cur)
		return nil, nil
	})
	return err
}

// conductorSteps is the task that runs the plan's conductor steps from the
// current index: until an agent step (back to … wait: the agent takes it
// on its next heartbeat), a reboot a step asked for (… wait until the
// agent is back), the end of the plan, or a failure. ramdisk says whether
// the agent is up; without it (disable_ramdisk) the task runs the plan to
// its end and finishes the flow itself.
func conductorSteps(kind string, ramdisk bool) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		hw, err := c.hardwareOf(n)
		if err != nil {
			return failed(err)
		}
		keep := currentTarget(n)
		backToAgent := outcome{ev: EvWait, target: keep}
		for {
			steps, idx := stepsOf(n)
			if idx >= len(steps) {
				if ramdisk {
					return backToAgent // the agent's next heartbeat ends the flow
				}
				if kind != "deploy" {
					c.cacheBIOSQuietly(ctx, n) // Ironic's node_update_cache as cleaning/servicing ends
				}
				return finishWithoutRamdisk(kind, n)
			}
			step := steps[idx]
			if !isConductorStep(hw, n, step) {
				if ramdisk {
					return backToAgent
				}
				return stepFailed(kind, n, step, errors.New("the step needs castiron's agent, which is not running"))
			}
			out, next := c.runConductorStep(ctx, kind, hw, n, step, ramdisk)
			if !next {
				return out
			}
			// The step is done: record it, move on (or stop for an abort
			// asked while it ran).
			// An abort asked for meanwhile is in the stored node only.
			abortAfter := false
			if err := c.saveNode(ctx, n, func(n *storage.Node) {
				if ab, _ := n.DriverInternalInfo[diiAbortAfter].(bool); ab {
					abortAfter = true
				}
				n.DriverInternalInfo[diiStepIndex] = idx + 1
				for _, k := range []string{diiStepState, diiStepStarted, diiStepReboot, diiStepProgress, diiAbortAfter} {
					delete(n.DriverInternalInfo, k)
				}
			}); err != nil {
				return failed(err)
			}
			c.log.InfoContext(ctx, "conductor step done", "node", n.UUID, "state", n.ProvisionState, "step", stepLabel(step))
			if abortAfter {
				// Ironic's get_last_error of the flow's abort.
				return failed(fmt.Errorf("By request, the %s operation was aborted during or after the completion of step \"%s\"", kind, stepLabel(step)))
			}
		}
	}
}

// currentTarget is the node's target state, kept across … wait <-> …ing
// (a manual clean returns to manageable).
func currentTarget(n *storage.Node) State {
	if n.TargetProvisionState != nil {
		return State(*n.TargetProvisionState)
	}
	return noTargetState
}

// runConductorStep calls one conductor step until it is done (next true),
// or returns the outcome that ends the task: a failure, or … wait for the
// agent to come back after a reboot the step asked for.
func (c *Conductor) runConductorStep(ctx context.Context, kind string, hw *HardwareType, n *storage.Node, step map[string]any, ramdisk bool) (outcome, bool) {
	iface, _ := step["interface"].(string)
	name, _ := step["step"].(string)
	d, _ := lookupStepFor(hw, n, iface, name)
	args, _ := step["args"].(map[string]any)
	state, _ := n.DriverInternalInfo[diiStepState].(map[string]any)
	if state == nil {
		state = map[string]any{}
	}
	if err := c.saveNode(ctx, n, func(n *storage.Node) {
		setCurrentStep(n, step, nil)
		if _, ok := n.DriverInternalInfo[diiStepStarted]; !ok {
			n.DriverInternalInfo[diiStepStarted] = c.now().Format(time.RFC3339Nano)
		}
	}); err != nil {
		return failed(err), false
	}
	started, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(n.DriverInternalInfo[diiStepStarted]))
	c.log.InfoContext(ctx, "conductor step", "node", n.UUID, "state", n.ProvisionState, "step", stepLabel(step))
	for {
		env := &stepEnv{c: c, hw: hw, node: n, dn: driverNode(n), kind: kind, args: args, state: state, ramdisk: ramdisk}
		res, err := d.run(ctx, env)
		if ctx.Err() != nil {
			return outcome{}, false // shutting down: runTask leaves the node for recovery
		}
		if err != nil {
			return stepFailed(kind, n, step, err), false
		}
		if err := c.saveNode(ctx, n, func(n *storage.Node) {
			n.DriverInternalInfo[diiStepState] = state
			if res.progress != nil {
				n.DriverInternalInfo[diiStepProgress] = res.progress
			}
			setCurrentStep(n, step, res.progress)
		}); err != nil {
			return failed(err), false
		}
		switch {
		case res.reboot:
			if err := c.saveNode(ctx, n, func(n *storage.Node) { n.DriverInternalInfo[diiStepReboot] = true }); err != nil {
				return failed(err), false
			}
			if ramdisk {
				// Ironic's reboot_to_finish_step: back into the ramdisk; the
				// agent's next heartbeat calls the step again.
				if err := bootAgent(ctx, c, n); err != nil {
					return stepFailed(kind, n, step, fmt.Errorf("rebooting the node failed: %w", err)), false
				}
				// (bootAgent forgot the old agent's token; the new one looks
				// up again.)
				return outcome{ev: EvWait, target: currentTarget(n)}, false
			}
			target := driver.Rebooting
			if ps := deref(n.PowerState); ps == driver.PowerOff {
				target = driver.PowerOn
			}
			if err := hw.Power.SetPowerState(ctx, driverNode(n), target, c.cfg.PowerTimeout); err != nil {
				return stepFailed(kind, n, step, fmt.Errorf("rebooting the node failed: %w", err)), false
			}
			on := driver.PowerOn
			if err := c.saveNode(ctx, n, func(n *storage.Node) { n.PowerState = &on }); err != nil {
				return failed(err), false
			}
			continue
		case res.poll:
			if d.abortable && c.aborts.take(n.UUID) {
				return failed(errors.New(abortMessage(State(n.ProvisionState), n))), false
			}
			if !started.IsZero() && c.now().Sub(started) > c.cfg.StepTimeout {
				msg := fmt.Sprintf("Timeout reached after %s waiting for the step to end", c.cfg.StepTimeout)
				if m, ok := res.progress["message"].(string); ok && m != "" {
					msg += ": " + m // what the step was waiting for
				}
				return stepFailed(kind, n, step, errors.New(msg)), false
			}
			t := time.NewTimer(c.cfg.StepPollInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return outcome{}, false
			case <-t.C:
			}
			continue
		}
		if res.result != nil {
			if err := c.saveNode(ctx, n, func(n *storage.Node) {
				results, _ := n.DriverInternalInfo[diiStepResults].(map[string]any)
				if results == nil {
					results = map[string]any{}
				}
				results[stepLabel(step)] = res.result
				n.DriverInternalInfo[diiStepResults] = results
			}); err != nil {
				return failed(err), false
			}
		}
		return outcome{}, true
	}
}

// stepFailed ends the flow after a conductor step failed: … failed with
// Ironic's last_error; clean and service failures while a step runs also
// put the node in maintenance with a fault (cleaning_error_handler,
// servicing_error_handler).
func stepFailed(kind string, n *storage.Node, step map[string]any, err error) outcome {
	msg := stepFailure(kind, n, step, err)
	out := outcome{ev: EvFail, err: errors.New(msg)}
	if kind == "deploy" {
		return out
	}
	f := kind + " failure"
	if kind == "clean" {
		f = "clean failure"
	}
	out.mutate = func(n *storage.Node) {
		n.Maintenance = true
		n.Fault = &f
		if n.MaintenanceReason == nil {
			n.MaintenanceReason = &msg
		}
		for _, k := range []string{diiStepState, diiStepStarted, diiStepReboot} {
			delete(n.DriverInternalInfo, k)
		}
	}
	return out
}

// finishWithoutRamdisk ends a flow that ran without the agent
// (disable_ramdisk): manageable after a manual clean, active after a
// service, with no tear down.
func finishWithoutRamdisk(kind string, n *storage.Node) outcome {
	ev := EvManage
	if kind == "service" {
		ev = EvDone
	}
	return outcome{ev: ev, mutate: func(n *storage.Node) {
		clearSteps(n)
		for _, k := range []string{diiStepState, diiStepStarted, diiStepReboot} {
			delete(n.DriverInternalInfo, k)
		}
		n.CleanStep = storage.JSONObject{}
		n.ServiceStep = storage.JSONObject{}
	}}
}
