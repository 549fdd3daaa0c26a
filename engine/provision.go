package engine

import (
	"context"
	"fmt"
	"strings"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/ramdisk/configdrive"
	"castiron/storage"
)

// ProvisionRequest is the body of PUT /v1/nodes/{id}/states/provision after
// the API has checked its shape and the microversion gates.
type ProvisionRequest struct {
	Target         string
	ConfigDrive    any
	CleanSteps     []map[string]any
	DeploySteps    []map[string]any
	ServiceSteps   []map[string]any
	RescuePassword *string
	DisableRamdisk *bool
	// Prepare, when set, runs once the node is known and the verb fits its
	// state, before the arguments are checked (Ironic's order): the API's
	// runbook handling, which fills the steps and DisableRamdisk.
	Prepare func(ctx context.Context, n *storage.Node, req *ProvisionRequest) error
}

// work is what a verb does after its state change: nothing (a synchronous
// verb), or a background task run with the node reserved.
type work func(ctx context.Context, c *Conductor, n *storage.Node) outcome

// outcome ends a task: the event to fire (none: leave the state as is), an
// optional explicit target, an error message, and extra changes to the node.
type outcome struct {
	ev     Event
	target State
	err    error
	mutate func(n *storage.Node)
	// next, when set, runs right after with the node still reserved
	// (deleting -> cleaning).
	next work
	// then, when set, runs once the outcome is written and the node
	// released (a discovered node going on to manage).
	then func(ctx context.Context, n *storage.Node)
}

func done(ev Event) outcome { return outcome{ev: ev} }

func failed(err error) outcome { return outcome{ev: EvFail, err: err} }

// Provision validates and starts a provision verb. It returns once the state
// change is recorded; the verb's work then runs in the background (the API
// answers 202). Errors are fault-classified.
func (c *Conductor) Provision(ctx context.Context, ident string, req ProvisionRequest) error {
	n, err := c.store.GetNode(ctx, ident)
	if err != nil {
		return err
	}
	ev, known := verbs[req.Target]
	if !known || !Actionable(State(n.ProvisionState), ev) {
		if n.Reservation != nil {
			return fault.Locked(n.UUID, *n.Reservation)
		}
		return fault.InvalidState(req.Target, n.UUID, n.ProvisionState)
	}
	if req.Prepare != nil {
		if err := req.Prepare(ctx, n, &req); err != nil {
			return err
		}
	}
	if err := c.checkProvisionArgs(n, ev, req); err != nil {
		return err
	}
	var task work
	var target State
	mutate := func(*storage.Node) {}
	from := State(n.ProvisionState)
	if ev == EvAbort && (from == CleanWait || from == DeployWait) {
		if step := currentStep(n); step != nil {
			if ab, ok := step["abortable"].(bool); ok && !ab {
				// Ironic: a step that cannot be interrupted runs to its end;
				// the abort happens then.
				return c.markAbortAfterStep(ctx, n.UUID)
			}
		}
	}
	switch ev {
	case EvManage:
		if from == Enroll {
			task = verifyTask
		}
	case EvProvide:
		task = cleanTask(false, nil)
	case EvClean:
		task, target = cleanTask(true, req.CleanSteps), Manageable
		if ramdiskless(n, req) {
			task = ramdisklessTask("clean", req.CleanSteps)
		}
	case EvInspect:
		task = inspectTask
		mutate = func(n *storage.Node) {
			now := c.now()
			n.InspectionStartedAt, n.InspectionFinishedAt = &now, nil
		}
	case EvDeploy, EvRebuild:
		task = deployTask
		mutate = func(n *storage.Node) {
			if req.ConfigDrive != nil {
				n.InstanceInfo["configdrive"] = req.ConfigDrive
			}
			if len(req.DeploySteps) > 0 {
				n.DriverInternalInfo["user_deploy_steps"] = req.DeploySteps
			}
		}
	case EvDelete:
		task = tearDownTask
	case EvAbort:
		// Aborting a wait or hold stops the ramdisk: power the node off.
		// (service failed --abort--> active leaves a deployed node running.)
		if states[from].WaitsForCallback || from == DeployHold || from == CleanHold || from == ServiceHold {
			task = abortTask(from)
		}
	case EvAdopt:
		task = adoptTask
	case EvRescue:
		task = rescueTask
		mutate = func(n *storage.Node) { n.InstanceInfo["rescue_password"] = *req.RescuePassword }
	case EvUnrescue:
		task = unrescueTask
	case EvService:
		task = serviceTask(req.ServiceSteps)
		if ramdiskless(n, req) {
			task = ramdisklessTask("service", req.ServiceSteps)
		}
	case EvUnhold:
		// hold -> wait: the agent picks up on its next heartbeat.
	}
	var abortMsg *string
	if ev == EvAbort {
		abortMsg = strp(abortMessage(from, n))
	}
	updated, err := c.store.UpdateNode(ctx, n.UUID, func(n *storage.Node) (*storage.Event, error) {
		// Re-check under the write lock: another request may have won.
		if n.Reservation != nil {
			return nil, fault.Locked(n.UUID, *n.Reservation)
		}
		if !Actionable(State(n.ProvisionState), ev) {
			return nil, fault.InvalidState(req.Target, n.UUID, n.ProvisionState)
		}
		e := c.fire(ctx, n, ev, target, abortMsg)
		mutate(n)
		if task != nil {
			n.Reservation = strp(c.cfg.Hostname)
		}
		return e, nil
	})
	if err != nil {
		return err
	}
	if task != nil {
		c.settle(ctx, c.runTask(ctx, updated, string(ev), task))
	}
	return nil
}

// settle waits, up to Config.VerbSettle, for a verb's task to record its
// outcome before the verb is answered. Work that is done at once (the fake
// and manual-management interfaces, a validation that fails) is then
// already visible to the client's first GET: a --wait client (ironicclient
// GETs at once, then every 2 s) returns without sleeping a poll interval.
// Longer work (a BMC call, a ramdisk boot) goes on in the background, and
// the verb is answered when the bound passes.
func (c *Conductor) settle(ctx context.Context, done <-chan struct{}) {
	if c.cfg.VerbSettle <= 0 {
		return
	}
	t := time.NewTimer(c.cfg.VerbSettle)
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	case <-ctx.Done():
	}
}

// checkProvisionArgs refuses arguments that do not fit the verb, with Ironic's
// messages, before anything changes.
func (c *Conductor) checkProvisionArgs(n *storage.Node, ev Event, req ProvisionRequest) error {
	if (ev == EvDeploy || ev == EvRebuild) && n.Maintenance {
		return fault.New(fault.Invalid, "The provisioning operation can't be performed on node %s because it's in maintenance mode.", n.UUID)
	}
	if n.Protected && (ev == EvDelete || ev == EvRebuild || (ev == EvDeploy && State(n.ProvisionState) == Active)) {
		return fault.New(fault.Forbidden, "Node %s is protected and cannot be undeployed, rebuilt or deleted", n.UUID)
	}
	if len(req.CleanSteps) > 0 && ev != EvClean {
		return fault.New(fault.Invalid, "\"clean_steps\" is only valid when setting target provision state to clean")
	}
	if len(req.ServiceSteps) > 0 && ev != EvService {
		return fault.New(fault.Invalid, "\"service_steps\" is only valid when setting target provision state to service")
	}
	if len(req.DeploySteps) > 0 && ev != EvDeploy && ev != EvRebuild {
		return fault.New(fault.Invalid, "\"deploy_steps\" is only valid when setting target provision state to active or rebuild")
	}
	if req.ConfigDrive != nil && ev != EvDeploy && ev != EvRebuild {
		return fault.New(fault.Invalid, "Adding a config drive is only supported when setting provision state to active")
	}
	if req.ConfigDrive != nil {
		if _, err := configdrive.Parse(req.ConfigDrive); err != nil {
			return fault.New(fault.Invalid, "%s", err.Error())
		}
	}
	if req.RescuePassword != nil && ev != EvRescue {
		return fault.New(fault.Invalid, "\"rescue_password\" is only valid when setting target provision state to rescue")
	}
	switch ev {
	case EvClean:
		if len(req.CleanSteps) == 0 {
			return fault.New(fault.Invalid, "\"clean_steps\" is required when setting target provision state to clean")
		}
		return checkSteps("clean", req.CleanSteps, false)
	case EvService:
		if len(req.ServiceSteps) == 0 {
			return fault.New(fault.Invalid, "\"service_steps\" is required when setting target provision state to service")
		}
		return checkSteps("service", req.ServiceSteps, false)
	case EvDeploy, EvRebuild:
		if err := checkSteps("deploy", req.DeploySteps, true); err != nil {
			return err
		}
		if err := c.checkRamdiskDeploy(n, req); err != nil {
			return err
		}
		if len(req.DeploySteps) > 0 && needsAgent(n, "deploy") {
			hw, err := c.hardwareOf(n)
			if err != nil {
				return err
			}
			if _, err := validateUserSteps("deploy", hw, n, req.DeploySteps, false); err != nil {
				return fault.New(fault.Invalid, "%s", err.Error())
			}
		}
		if needsAgent(n, "deploy") && !ramdiskDeploy(n) && !customAgentDeploy(n) {
			if _, ok := n.InstanceInfo["image_source"]; !ok {
				return fault.New(fault.Invalid, "Cannot validate image information for node %s because one or more parameters are missing from its instance_info and insufficient information is present to boot from a remote volume. Missing are: ['image_source']", n.UUID)
			}
		}
		return c.validatePower(n)
	case EvRescue:
		if req.RescuePassword == nil || strings.TrimSpace(*req.RescuePassword) == "" {
			return fault.New(fault.Invalid, "A non-empty \"rescue_password\" is required when setting target provision state to rescue")
		}
		if n.RescueInterface == "no-rescue" {
			return fault.New(fault.Invalid, "Driver %s does not support rescue (disabled or not implemented).", n.Driver)
		}
	case EvInspect:
		if n.InspectInterface == "no-inspect" {
			return fault.New(fault.Invalid, "Driver %s does not support inspect (disabled or not implemented).", n.Driver)
		}
		return c.validatePower(n)
	case EvManage, EvProvide, EvAdopt:
		if State(n.ProvisionState) == Enroll || ev == EvAdopt {
			return nil // verification reports driver_info problems as last_error
		}
	}
	return nil
}

// checkSteps checks the shape of user steps as Ironic's _STEPS_SCHEMA does.
func checkSteps(kind string, steps []map[string]any, priority bool) error {
	for i, s := range steps {
		iface, _ := s["interface"].(string)
		step, _ := s["step"].(string)
		if iface == "" || step == "" {
			return fault.New(fault.Invalid, "Invalid %s step %d: 'interface' and 'step' are required strings", kind, i)
		}
		valid := false
		for _, k := range interfaceKinds {
			valid = valid || k == iface
		}
		if !valid {
			return fault.New(fault.Invalid, "Invalid %s step %d: %q is not a valid interface", kind, i, iface)
		}
		if a, ok := s["args"]; ok {
			if _, isObj := a.(map[string]any); !isObj {
				return fault.New(fault.Invalid, "Invalid %s step %d: 'args' must be an object", kind, i)
			}
		}
		if priority {
			if _, ok := s["priority"]; !ok {
				return fault.New(fault.Invalid, "Invalid %s step %d: 'priority' is required", kind, i)
			}
		}
	}
	return nil
}

// runTask runs w in the background with n reserved, then fires the outcome's
// event and releases the reservation in one write. The channel it returns
// is closed once that write is done (or the task gave up).
func (c *Conductor) runTask(from context.Context, n *storage.Node, verb string, w work) <-chan struct{} {
	log := c.log.With("node", n.UUID, "verb", verb)
	recorded := make(chan struct{})
	c.spawn(from, func(ctx context.Context) {
		defer close(recorded)
		state := n.ProvisionState
		out := w(ctx, c, n)
		if ctx.Err() != nil {
			// Shutting down: leave the reservation; restart recovery fails the
			// node as Ironic does for a conductor that died mid-task.
			log.WarnContext(ctx, "task interrupted by shutdown", "state", state)
			return
		}
		if c.aborts.take(n.UUID) && out.ev != EvFail && Actionable(State(state), EvFail) {
			out = failed(fmt.Errorf("%s was aborted by request", verb))
		}
		chained := false
		updated, err := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
			cur.Reservation = nil
			chained = false
			if out.mutate != nil {
				out.mutate(cur)
			}
			if out.ev == "" || cur.ProvisionState != state || !Actionable(State(state), out.ev) {
				return nil, nil
			}
			var msg *string
			if out.err != nil {
				msg = strp(out.err.Error())
			}
			e := c.fire(ctx, cur, out.ev, out.target, msg)
			if out.next != nil {
				cur.Reservation = strp(c.cfg.Hostname)
				chained = true
			}
			return e, nil
		})
		if err != nil {
			log.ErrorContext(ctx, "task could not record its outcome", "state", state, "err", err)
			return
		}
		if out.err != nil {
			log.WarnContext(ctx, "task failed", "state", state, "err", out.err)
		}
		if chained {
			c.runTask(ctx, updated, verb, out.next)
		} else if out.then != nil {
			out.then(ctx, updated)
		}
	})
	return recorded
}

// driverNode is what a driver sees of n.
func driverNode(n *storage.Node) driver.Node {
	dn := driver.Node{
		UUID:         n.UUID,
		DriverInfo:   n.DriverInfo,
		InternalInfo: n.DriverInternalInfo,
		Properties:   n.Properties,
		PowerState:   deref(n.PowerState),
		// Drivers reboot such a node in place.
		DisablePowerOff: n.DisablePowerOff,
	}
	if n.BootMode != nil {
		dn.BootMode = *n.BootMode
	} else if cap, ok := n.Properties["capabilities"].(string); ok && strings.Contains(cap, "boot_mode:uefi") {
		dn.BootMode = "uefi"
	}
	return dn
}

func (c *Conductor) hardwareOf(n *storage.Node) (*HardwareType, error) {
	hw, ok := c.hw.Get(n.Driver)
	if !ok {
		return nil, unknownDriver(n.Driver, n.ConductorGroup)
	}
	return hw, nil
}

func (c *Conductor) validatePower(n *storage.Node) error {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return err
	}
	dn := driverNode(n)
	if err := hw.Power.Validate(dn); err != nil {
		return err
	}
	return hw.Management.Validate(dn)
}

func verifyTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return failed(err)
	}
	dn := driverNode(n)
	if err := hw.Power.Validate(dn); err != nil {
		return failed(fmt.Errorf("Failed to validate power driver interface for node %s. Error: %v", n.UUID, err))
	}
	if err := hw.Management.Validate(dn); err != nil {
		return failed(fmt.Errorf("Failed to validate management driver interface for node %s. Error: %v", n.UUID, err))
	}
	if err := hw.Power.Verify(ctx, dn); err != nil {
		return failed(fmt.Errorf("Failed to verify BMC credentials for node %s: %v", n.UUID, err))
	}
	ps, err := hw.Power.PowerState(ctx, dn)
	if err != nil {
		return failed(fmt.Errorf("Failed to get power state for node %s: %v", n.UUID, err))
	}
	c.cacheBIOSQuietly(ctx, n) // Ironic's node_update_cache after verification
	return outcome{ev: EvDone, mutate: func(n *storage.Node) {
		if ps == "" {
			n.PowerState = nil // fake-hardware never powered: null, as Ironic
			return
		}
		n.PowerState = &ps
	}}
}

// automatedClean reports whether automated cleaning applies to n.
func (c *Conductor) automatedClean(n *storage.Node) bool {
	if n.AutomatedClean != nil {
		return *n.AutomatedClean
	}
	return c.cfg.AutomatedClean
}

func cleanTask(manual bool, steps []map[string]any) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		finish := EvDone
		if manual {
			finish = EvManage
		}
		if !manual && !c.automatedClean(n) {
			return done(finish)
		}
		c.cacheBIOSQuietly(ctx, n) // Ironic's node_update_cache as cleaning starts
		if !needsAgent(n, "deploy") {
			// Fake deploy interface: its steps complete at once.
			return outcome{ev: finish, mutate: func(n *storage.Node) { n.CleanStep = storage.JSONObject{} }}
		}
		plan, err := c.cleanSteps(n, manual, steps)
		if err != nil {
			return failed(err)
		}
		if len(plan) == 0 {
			return outcome{ev: finish, mutate: func(n *storage.Node) { n.CleanStep = storage.JSONObject{} }}
		}
		if err := bootAgent(ctx, c, n); err != nil {
			return failed(err)
		}
		return outcome{ev: EvWait, mutate: func(n *storage.Node) {
			n.DriverInternalInfo["clean_steps"] = steps
			n.DriverInternalInfo["cleaning_manual"] = manual
			startSteps(n, plan)
		}}
	}
}

func inspectTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	if outOfBand["inspect:"+n.InspectInterface] {
		return inspectOutOfBand(ctx, c, n)
	}
	if needsAgent(n, "inspect") {
		if err := bootAgent(ctx, c, n); err != nil {
			return failed(err)
		}
		return done(EvWait)
	}
	return outcome{ev: EvDone, mutate: func(n *storage.Node) {
		now := c.now()
		n.InspectionFinishedAt = &now
	}}
}

func deployTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	if ramdiskDeploy(n) {
		return ramdiskDeployTask(ctx, c, n)
	}
	if needsAgent(n, "deploy") {
		plan, err := c.deploySteps(ctx, n)
		if err != nil {
			return failed(err)
		}
		if err := bootAgent(ctx, c, n); err != nil {
			return failed(err)
		}
		return outcome{ev: EvWait, mutate: func(n *storage.Node) { startSteps(n, plan) }}
	}
	on := driver.PowerOn
	return outcome{ev: EvDone, mutate: func(n *storage.Node) {
		n.PowerState = &on
		n.DeployStep = storage.JSONObject{}
	}}
}

func tearDownTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	if err := powerOff(ctx, c, n); err != nil {
		return failed(fmt.Errorf("Failed to tear down: %v", err))
	}
	c.cleanUpRamdiskInstance(ctx, n)
	if err := c.cleanUpInstanceSecureBoot(ctx, n); err != nil {
		return failed(err)
	}
	// Deleting -> cleaning; the clean task is the same as after provide.
	return outcome{ev: EvClean, next: cleanTask(false, nil), mutate: func(n *storage.Node) {
		n.InstanceInfo = storage.JSONObject{}
		n.InstanceUUID = nil
		n.InstanceName = nil // API 1.104: undeploy clears it, as Ironic's tear down
		delete(n.DriverInternalInfo, "user_deploy_steps")
	}}
}

func adoptTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	if err := c.validatePower(n); err != nil {
		return failed(err)
	}
	return done(EvDone)
}

func rescueTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	if needsAgent(n, "rescue") {
		if err := bootAgent(ctx, c, n); err != nil {
			return failed(err)
		}
		return done(EvWait)
	}
	return done(EvDone)
}

func unrescueTask(ctx context.Context, c *Conductor, n *storage.Node) outcome {
	if ramdiskDeploy(n) {
		// Ironic's unrescue: the boot interface's prepare_instance again.
		if err := c.bootRamdiskInstance(ctx, n); err != nil {
			return failed(err)
		}
		on := driver.PowerOn
		return outcome{ev: EvDone, mutate: func(n *storage.Node) {
			delete(n.InstanceInfo, "rescue_password")
			n.PowerState = &on
		}}
	}
	return outcome{ev: EvDone, mutate: func(n *storage.Node) { delete(n.InstanceInfo, "rescue_password") }}
}

// serviceTask runs service steps on an active node: through the agent
// (booted as for cleaning) and the conductor, as a manual clean does; the
// node boots its disk again at the end.
func serviceTask(steps []map[string]any) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		if !needsAgent(n, "deploy") {
			return done(EvDone)
		}
		hw, err := c.hardwareOf(n)
		if err != nil {
			return failed(err)
		}
		plan, err := validateUserSteps("service", hw, n, steps, false)
		if err != nil {
			return failed(fmt.Errorf("Cannot service node %s: %v", n.UUID, err))
		}
		if err := bootAgent(ctx, c, n); err != nil {
			return failed(err)
		}
		return outcome{ev: EvWait, mutate: func(n *storage.Node) {
			n.DriverInternalInfo["service_steps"] = steps
			startSteps(n, plan)
		}}
	}
}
