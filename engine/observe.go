package engine

import (
	"context"
	"sync"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// Observer is told what the conductor does, for metrics. Calls are made
// inline: implementations must be cheap and safe for concurrent use.
type Observer interface {
	// Transition is a committed provision state change.
	Transition(verb, from, to string)
	// VerbDone is a node reaching a stable state d after verb took it out
	// of the previous one (verbs under way at a restart are not reported).
	VerbDone(verb, state string, d time.Duration)
	// BMCCall is one call to a node's power or management driver.
	BMCCall(hardwareType, op string, d time.Duration, err error)
	// AgentCall is one call of the ramdisk agent (lookup, heartbeat,
	// inspection) and its result (ok, or the kind of refusal).
	AgentCall(call, result string)
}

type noObserver struct{}

func (noObserver) Transition(string, string, string)            {}
func (noObserver) VerbDone(string, string, time.Duration)       {}
func (noObserver) BMCCall(string, string, time.Duration, error) {}
func (noObserver) AgentCall(string, string)                     {}

// resultLabel names an outcome for metrics by its fault kind.
func resultLabel(err error) string {
	if err == nil {
		return "ok"
	}
	switch fault.KindOf(err) {
	case fault.Invalid:
		return "invalid"
	case fault.NotFound:
		return "not_found"
	case fault.Conflict, fault.NodeLocked:
		return "conflict"
	case fault.Forbidden:
		return "forbidden"
	case fault.Unavailable, fault.StorageFull:
		return "unavailable"
	}
	return "error"
}

// verbClock times verbs: from the transition that leaves a stable state to
// the one that reaches the next stable state, per node, in memory.
type verbClock struct {
	mu      sync.Mutex
	started map[string]verbStart
}

type verbStart struct {
	verb string
	at   time.Time
}

// observe reports a committed transition and, when it ends a verb, the
// verb's duration.
func (c *Conductor) observe(uuid string, e *storage.Event) {
	if e == nil || e.EventType != "provisioning" || e.Verb == "" {
		return
	}
	c.obs.Transition(e.Verb, e.FromState, e.ToState)
	fromStable := states[State(e.FromState)].Stable
	toStable := states[State(e.ToState)].Stable
	k := &c.verbs
	k.mu.Lock()
	if fromStable {
		k.started[uuid] = verbStart{verb: e.Verb, at: e.CreatedAt}
	}
	s, ok := k.started[uuid]
	if toStable {
		delete(k.started, uuid)
	}
	k.mu.Unlock()
	if ok && toStable {
		c.obs.VerbDone(s.verb, e.ToState, e.CreatedAt.Sub(s.at))
	}
}

// forget drops a deleted node's verb clock.
func (c *Conductor) forget(uuid string) {
	c.verbs.mu.Lock()
	delete(c.verbs.started, uuid)
	c.verbs.mu.Unlock()
}

// meteredPower reports every call that may reach a BMC.
type meteredPower struct {
	driver.Power
	hw  string
	obs Observer
}

func (p meteredPower) Verify(ctx context.Context, n driver.Node) error {
	start := time.Now()
	err := p.Power.Verify(ctx, n)
	p.obs.BMCCall(p.hw, "verify", time.Since(start), err)
	return err
}

func (p meteredPower) PowerState(ctx context.Context, n driver.Node) (string, error) {
	start := time.Now()
	s, err := p.Power.PowerState(ctx, n)
	p.obs.BMCCall(p.hw, "get_power_state", time.Since(start), err)
	return s, err
}

func (p meteredPower) SetPowerState(ctx context.Context, n driver.Node, target string, timeout time.Duration) error {
	start := time.Now()
	err := p.Power.SetPowerState(ctx, n, target, timeout)
	p.obs.BMCCall(p.hw, "set_power_state", time.Since(start), err)
	return err
}

// meteredManagement reports boot device calls. Optional features (NMI,
// indicators, virtual media, ...) are found on the driver it wraps
// (managementFeature unwraps it) and are not metered.
type meteredManagement struct {
	driver.Management
	hw  string
	obs Observer
}

func (m meteredManagement) SetBootDevice(ctx context.Context, n driver.Node, device string, persistent bool) error {
	start := time.Now()
	err := m.Management.SetBootDevice(ctx, n, device, persistent)
	m.obs.BMCCall(m.hw, "set_boot_device", time.Since(start), err)
	return err
}

func (m meteredManagement) BootDevice(ctx context.Context, n driver.Node) (driver.BootDevice, error) {
	start := time.Now()
	d, err := m.Management.BootDevice(ctx, n)
	m.obs.BMCCall(m.hw, "get_boot_device", time.Since(start), err)
	return d, err
}

// meteredInspector reports out-of-band inspections (they read the BMC).
type meteredInspector struct {
	driver.Inspector
	hw  string
	obs Observer
}

func (i meteredInspector) InspectHardware(ctx context.Context, n driver.Node) (*driver.Inspection, error) {
	start := time.Now()
	res, err := i.Inspector.InspectHardware(ctx, n)
	i.obs.BMCCall(i.hw, "inspect_hardware", time.Since(start), err)
	return res, err
}

// unwrapManagement is the driver behind a metered management interface.
func unwrapManagement(m driver.Management) driver.Management {
	if mm, ok := m.(meteredManagement); ok {
		return mm.Management
	}
	return m
}

// metered returns a copy of the registry whose drivers report to obs.
func (r *Registry) metered(obs Observer) *Registry {
	out := &Registry{types: map[string]*HardwareType{}}
	for name, t := range r.types {
		cp := *t
		if cp.Power != nil {
			cp.Power = meteredPower{Power: cp.Power, hw: name, obs: obs}
		}
		if cp.Management != nil {
			cp.Management = meteredManagement{Management: cp.Management, hw: name, obs: obs}
		}
		if cp.Inspector != nil {
			cp.Inspector = meteredInspector{Inspector: cp.Inspector, hw: name, obs: obs}
		}
		out.types[name] = &cp
	}
	return out
}
