package engine

import (
	"context"
	"fmt"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// AgentHeartbeat is POST /v1/heartbeat/{node}: it checks the agent token,
// keeps the wait state's deadline fresh, records the agent's report on its
// step, and answers what the agent does next (castiron's pull protocol,
// ramdisk/PROTOCOL.md). The step plan advances in the same write as the
// report, so a heartbeat repeated after a lost answer changes nothing twice.
func (c *Conductor) AgentHeartbeat(ctx context.Context, ident string, hb protocol.Heartbeat) (_ protocol.Instruction, err error) {
	defer func() { c.obs.AgentCall("heartbeat", resultLabel(err)) }()
	wait := protocol.Instruction{Command: protocol.CmdWait, HeartbeatInterval: c.cfg.AgentHeartbeatInterval.Seconds()}
	var instr protocol.Instruction
	var after work
	var afterVerb string
	var then func(ctx context.Context, n *storage.Node)
	// The token is checked on the node as the write reads it, with no read
	// of its own before: that read decoded the whole node a second time
	// for every heartbeat (issue 28's storm profile: allocation and GC). A
	// wrong token writes nothing (fn's error rolls the write back).
	var refused *storage.Node
	updated, err := c.store.UpdateNode(ctx, ident, func(cur *storage.Node) (*storage.Event, error) {
		instr, after, afterVerb, then, refused = wait, nil, "", nil, nil
		if !tokenValid(cur, hb.AgentToken) {
			refused = cur
			return nil, fault.New(fault.Invalid, "Invalid or missing agent token received.")
		}
		now := c.now()
		cur.DriverInternalInfo[diiLastHeartbeat] = now.Format(time.RFC3339Nano)
		if hb.AgentVersion != "" {
			cur.DriverInternalInfo[diiAgentVersion] = hb.AgentVersion
		}
		st := State(cur.ProvisionState)
		switch {
		case cur.Reservation != nil:
			return nil, nil // a task is working on the node (e.g. the power off after an abort)
		case st == InspectWait || st == RescueWait || (st == ServiceWait && cur.DriverInternalInfo[diiSteps] == nil):
			cur.ProvisionUpdatedAt = &now
			return nil, nil
		case st == CleanWait || st == DeployWait || st == ServiceWait:
			cur.ProvisionUpdatedAt = &now
			e := c.advanceSteps(ctx, cur, hb.Step, &instr, &after, &afterVerb)
			return e, nil
		case states[st].Failure:
			instr = agentStop(cur, protocol.CmdAbort, fmt.Sprintf("node is in %s", st))
			return nil, nil
		case lookupAllowed[st]:
			return nil, nil // deploying/cleaning: the conductor is between steps
		case discovered(cur) && cur.DriverInternalInfo[diiBMCUser] == bmcUserPending:
			e, next := c.bmcUserStep(cur, hb.Step, &instr)
			then = next
			return e, nil
		default:
			instr = agentStop(cur, protocol.CmdPowerOff, fmt.Sprintf("node is in %s", st))
			return nil, nil
		}
	})
	if refused != nil {
		c.log.WarnContext(ctx, "agent heartbeat with a wrong token", "node", refused.UUID, "state", refused.ProvisionState)
	}
	if err != nil {
		return wait, err
	}
	if after != nil {
		c.runTask(ctx, updated, afterVerb, after)
	}
	if then != nil {
		then(ctx, updated)
	}
	return instr, nil
}

// advanceSteps applies the agent's report on the current step and sets the
// instruction. It may fire an event (step failed, abort after step, all
// steps done) and then schedules the task that follows it.
func (c *Conductor) advanceSteps(ctx context.Context, n *storage.Node, rep *protocol.StepReport, instr *protocol.Instruction, after *work, afterVerb *string) *storage.Event {
	steps, idx := stepsOf(n)
	kind := kindOf(State(n.ProvisionState))
	manual, _ := n.DriverInternalInfo["cleaning_manual"].(bool)
	finish := func() *storage.Event {
		e := c.fire(ctx, n, EvResume, currentTarget(n), nil)
		n.Reservation = strp(c.cfg.Hostname)
		*after, *afterVerb = finishAgentWork(kind, manual), "agent-done"
		*instr = agentStop(n, protocol.CmdPowerOff, "all steps done")
		e.User = "agent"
		return e
	}
	if idx >= len(steps) {
		return finish()
	}
	step := steps[idx]
	id, _ := step["id"].(string)
	// A conductor step: the conductor takes the node back (… wait ->
	// …ing) and runs it; the agent waits meanwhile.
	handOff := func(step map[string]any) *storage.Event {
		setCurrentStep(n, step, nil)
		e := c.fire(ctx, n, EvResume, currentTarget(n), nil)
		n.Reservation = strp(c.cfg.Hostname)
		*after, *afterVerb = conductorSteps(kind, true), "conductor-step"
		*instr = protocol.Instruction{Command: protocol.CmdWait, Reason: "the conductor runs step " + stepLabel(step), HeartbeatInterval: c.cfg.AgentHeartbeatInterval.Seconds()}
		e.User = "agent"
		return e
	}
	hw, _ := c.hardwareOf(n)
	// fail ends the flow on a step error found here (the conductor's
	// part of an agent step), as the agent's own failures do.
	fail := func(step map[string]any, err error) *storage.Event {
		msg := stepFailure(kind, n, step, err)
		e := c.fire(ctx, n, EvFail, noTargetState, &msg)
		n.Reservation = strp(c.cfg.Hostname)
		*after, *afterVerb = abortTask(State(n.ProvisionState)), "agent-failed"
		*instr = agentStop(n, protocol.CmdPowerOff, msg)
		e.User = "agent"
		return e
	}
	run := func() *storage.Event {
		if isConductorStep(hw, n, step) {
			return handOff(step)
		}
		setCurrentStep(n, step, nil)
		ps := protocolStep(step)
		if d, ok := lookupStepFor(hw, n, ps.Interface, ps.Name); ok && d.prepare != nil {
			args, err := d.prepare(n, ps.Args)
			if err != nil {
				return fail(step, err)
			}
			ps.Args = args
		}
		*instr = protocol.Instruction{Command: protocol.CmdRunStep, Step: ps, HeartbeatInterval: c.cfg.AgentHeartbeatInterval.Seconds()}
		return nil
	}
	if rep == nil || rep.ID != id {
		return run()
	}
	switch rep.Status {
	case protocol.StepRunning:
		var progress map[string]any
		if p := rep.Progress; p != nil {
			progress = map[string]any{"done": p.Done, "total": p.Total, "unit": p.Unit, "percent": p.Percent, "message": p.Message}
			n.DriverInternalInfo[diiStepProgress] = progress
		}
		setCurrentStep(n, step, progress)
		return nil
	case protocol.StepFailed:
		msg := fmt.Sprintf("Agent returned error for %s step %s: %s.", kind, stepLabel(step), rep.Error)
		e := c.fire(ctx, n, EvFail, noTargetState, &msg)
		n.Reservation = strp(c.cfg.Hostname)
		*after, *afterVerb = abortTask(State(n.ProvisionState)), "agent-failed"
		*instr = agentStop(n, protocol.CmdPowerOff, rep.Error)
		e.User = "agent"
		return e
	case protocol.StepSucceeded:
		iface, _ := step["interface"].(string)
		name, _ := step["step"].(string)
		if d, ok := lookupStepFor(hw, n, iface, name); ok && d.done != nil {
			if err := d.done(n, rep.Result, c.now()); err != nil {
				return fail(step, err)
			}
		}
		results, _ := n.DriverInternalInfo[diiStepResults].(map[string]any)
		if results == nil {
			results = map[string]any{}
		}
		results[stepLabel(step)] = rep.Result
		n.DriverInternalInfo[diiStepResults] = results
		n.DriverInternalInfo[diiStepIndex] = idx + 1
		delete(n.DriverInternalInfo, diiStepProgress)
		c.log.InfoContext(ctx, "agent step done", "node", n.UUID, "state", n.ProvisionState, "verb", "heartbeat", "step", stepLabel(step))
		if ab, _ := n.DriverInternalInfo[diiAbortAfter].(bool); ab {
			from := State(n.ProvisionState)
			e := c.fire(ctx, n, EvAbort, noTargetState, strp(fmt.Sprintf("Operation aborted by request in state %s after step %s ended.", from, stepLabel(step))))
			delete(n.DriverInternalInfo, diiAbortAfter)
			n.Reservation = strp(c.cfg.Hostname)
			*after, *afterVerb = abortTask(from), "abort"
			*instr = agentStop(n, protocol.CmdAbort, "aborted by request")
			return e
		}
		if idx+1 >= len(steps) {
			return finish()
		}
		step = steps[idx+1]
		return run()
	}
	return run()
}

// agentStop is the instruction that ends an agent's work on n: cmd
// (power off, or abort then power off), or, for a node that must never be
// powered off (disable_power_off), wait: the agent stays up and the
// conductor reboots the node in place where it would power it off and on.
func agentStop(n *storage.Node, cmd, reason string) protocol.Instruction {
	if n.DisablePowerOff {
		return protocol.Instruction{Command: protocol.CmdWait, Reason: reason + " (disable_power_off: the node stays powered)"}
	}
	return protocol.Instruction{Command: cmd, Reason: reason}
}

func stepLabel(step map[string]any) string {
	return fmt.Sprintf("%v.%v", step["interface"], step["step"])
}

// waitPoweredOff gives the ramdisk time to sync and power the machine off
// itself, then forces it off.
func (c *Conductor) waitPoweredOff(ctx context.Context, n *storage.Node) error {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	dn := driverNode(n)
	deadline := time.Now().Add(c.cfg.AgentPowerOffWait)
	for time.Now().Before(deadline) {
		if ps, err := hw.Power.PowerState(ctx, dn); err == nil && ps == driver.PowerOff {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return hw.Power.SetPowerState(ctx, dn, driver.PowerOff, c.cfg.PowerTimeout)
}
