package engine

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"castiron/fault"
	"castiron/storage"
)

// bootPurpose maps the states in which a node network-boots castiron's
// ramdisk to why it does. Every other state gets no DHCP answer.
var bootPurpose = map[State]string{
	Inspecting:  "inspect",
	InspectWait: "inspect",
	Cleaning:    "clean",
	CleanWait:   "clean",
	Deploying:   "deploy",
	DeployWait:  "deploy",
	Rescuing:    "rescue",
	RescueWait:  "rescue",
	Servicing:   "service",
	ServiceWait: "service",
}

// BootDecision is the answer of BootTarget.
type BootDecision struct {
	NodeUUID string // empty for an unknown MAC
	Purpose  string
	// CPUArch is the node's properties.cpu_arch ("x86_64", "aarch64"),
	// empty when unknown: the ramdisk to serve when the firmware does not
	// say its architecture.
	CPUArch string
	// Instance, for purpose "instance", is what a node deployed with the
	// ramdisk interface boots in place of castiron's ramdisk.
	Instance *InstanceBoot
}

// bootGate caches "is any inspection of a node without ports running", the
// one question of the gate that needs a scan, and each MAC's last answer
// (a DHCP exchange asks twice within milliseconds, a boot storm thousands of
// times a second). Both are valid while gen (bumped on every provision state
// change and port change) has not moved, and for at most a ring refresh.
type bootGate struct {
	gen atomic.Uint64

	mu sync.Mutex
	// answers holds the decisions of generation answersAt, by MAC bytes.
	answers    map[string]gateAnswer
	answersAt  uint64
	portless   bool
	portlessAt uint64
	// portlessWhen is when portless was read.
	portlessWhen time.Time
	portlessOK   bool
	// enroll counts the nodes in enroll, for the discovery cap.
	enroll   int
	enrollAt uint64
	enrollOK bool

	// ports is every port's address as of portGen generation portsAt
	// (bumped on port writes only: node updates leave it valid), read at
	// portsWhen, so that a MAC without a port (a storm of unknown machines,
	// discovery) costs no database read. Re-read at most once a ring
	// refresh.
	portGen   atomic.Uint64
	ports     map[string]struct{}
	portsAt   uint64
	portsWhen time.Time
}

func (g *bootGate) invalidate() { g.gen.Add(1) }

// invalidatePorts is invalidate after a port write.
func (g *bootGate) invalidatePorts() {
	g.portGen.Add(1)
	g.gen.Add(1)
}

// mayBePort reports whether mac may be a port's address: false only when
// the cached set of addresses is current and lacks it.
func (c *Conductor) mayBePort(ctx context.Context, mac string) bool {
	g := &c.gate
	gen := g.portGen.Load()
	ttl := c.ringRefresh()
	g.mu.Lock()
	if g.ports != nil && g.portsAt == gen && time.Since(g.portsWhen) < ttl {
		_, ok := g.ports[mac]
		g.mu.Unlock()
		return ok
	}
	if time.Since(g.portsWhen) < ttl {
		// Read less than a refresh ago (ports are being written): the
		// caller asks for this MAC alone rather than re-reading them all.
		g.mu.Unlock()
		return true
	}
	g.portsWhen = time.Now()
	g.mu.Unlock()
	addrs, err := c.store.PortAddresses(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "boot gate: listing port addresses failed", "err", err)
		return true
	}
	set := make(map[string]struct{}, len(addrs))
	for _, a := range addrs {
		set[strings.ToLower(a)] = struct{}{}
	}
	g.mu.Lock()
	g.ports, g.portsAt = set, gen
	g.mu.Unlock()
	_, ok := set[mac]
	return ok
}

// gateAnswer is one MAC's decision and when it was made.
type gateAnswer struct {
	d  BootDecision
	ok bool
	at time.Time
}

// maxGateAnswers bounds the per-MAC cache (a flood of random MACs).
const maxGateAnswers = 1 << 14

// answer returns mac's cached decision of generation gen younger than ttl.
func (g *bootGate) answer(mac string, gen uint64, ttl time.Duration) (BootDecision, bool, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	a, hit := g.answers[mac]
	if !hit || g.answersAt != gen || time.Since(a.at) >= ttl {
		return BootDecision{}, false, false
	}
	return a.d, a.ok, true
}

// remember caches mac's decision, read at generation gen (loaded before the
// reads, so a write committed meanwhile makes it stale at once).
func (g *bootGate) remember(mac string, gen uint64, d BootDecision, ok bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.answers == nil || g.answersAt != gen || len(g.answers) >= maxGateAnswers {
		if g.answersAt > gen {
			return // a newer generation's cache: this answer is already stale
		}
		if g.answers == nil {
			g.answers = make(map[string]gateAnswer)
		}
		clear(g.answers) // keeps its memory: a storm refills it at once
		g.answersAt = gen
	}
	g.answers[mac] = gateAnswer{d: d, ok: ok, at: time.Now()}
}

// BootTarget decides whether castiron network-boots the machine with this
// MAC (ARCHITECTURE: "pxe serves only whom engine allows"): a node in a
// state that needs its ramdisk; an unknown MAC only while an inspection of a
// node without ports is running, or when discovery is on. A known node in
// any other state is refused even with discovery on, so castiron never takes
// over a deployed machine.
func (c *Conductor) BootTarget(ctx context.Context, mac net.HardwareAddr) (BootDecision, bool) {
	gen := c.gate.gen.Load()
	if d, ok, hit := c.gate.answer(string(mac), gen, c.ringRefresh()); hit {
		return d, ok
	}
	d, ok, final := c.bootTarget(ctx, mac)
	if final {
		c.gate.remember(string(mac), gen, d, ok)
	}
	return d, ok
}

// bootTarget is BootTarget without its cache; final is false when the
// answer came from a failed read (not to be remembered).
func (c *Conductor) bootTarget(ctx context.Context, mac net.HardwareAddr) (d BootDecision, ok, final bool) {
	addr := mac.String()
	var p *storage.Port
	var err error
	known := c.mayBePort(ctx, addr)
	if known {
		p, err = c.store.GetPortByAddress(ctx, addr)
	}
	switch {
	case !known:
	case err == nil:
		n, err := c.store.GetNode(ctx, p.NodeUUID)
		if err != nil {
			return BootDecision{}, false, false
		}
		if c.cfg.Discovery && discovered(n) {
			// A discovered machine booting again is inspected again.
			return BootDecision{NodeUUID: n.UUID, Purpose: "inspect"}, true, true
		}
		purpose, ok := bootPurpose[State(n.ProvisionState)]
		inst, isInstance := c.instanceBootOf(n)
		if isInstance {
			purpose, ok = "instance", true
		}
		// With several conductors on one network, only the node's owner
		// answers it (the others stay silent, as for any other machine).
		arch, _ := n.Properties["cpu_arch"].(string)
		return BootDecision{NodeUUID: n.UUID, Purpose: purpose, CPUArch: arch, Instance: inst}, ok && c.Owns(n), true
	case !fault.Is(err, fault.NotFound):
		c.log.WarnContext(ctx, "boot gate: port lookup failed", "mac", mac.String(), "err", err)
		return BootDecision{}, false, false
	}
	if c.cfg.Discovery {
		if waiting, full := c.enrollFull(ctx); full {
			_ = c.refuse(mac.String(), "cap", fmt.Errorf("%d nodes wait in enroll", waiting))
			return BootDecision{}, false, true
		}
		// An unknown machine is answered by one conductor of this group:
		// the one the group's ring maps its MAC to.
		return BootDecision{Purpose: "inspect"}, c.ownsKey(mac.String()), true
	}
	if c.portlessInspection(ctx) {
		return BootDecision{Purpose: "inspect"}, true, true
	}
	return BootDecision{}, false, true
}

// enrollFull reports whether the discovery cap is reached, counting the
// nodes in enroll once per generation (a flood of unknown DHCP clients
// costs no query each).
func (c *Conductor) enrollFull(ctx context.Context) (int, bool) {
	if c.cfg.DiscoveryMaxEnroll < 0 {
		return 0, false
	}
	gen := c.gate.gen.Load()
	c.gate.mu.Lock()
	if c.gate.enrollOK && c.gate.enrollAt == gen {
		n := c.gate.enroll
		c.gate.mu.Unlock()
		return n, n >= c.cfg.DiscoveryMaxEnroll
	}
	c.gate.mu.Unlock()
	n, err := c.enrollCount(ctx)
	if err != nil {
		c.log.Warn("boot gate: counting enroll nodes failed", "err", err)
		return 0, false
	}
	c.gate.mu.Lock()
	c.gate.enroll, c.gate.enrollAt, c.gate.enrollOK = n, gen, true
	c.gate.mu.Unlock()
	return n, n >= c.cfg.DiscoveryMaxEnroll
}

// portlessInspection reports whether a node without ports that this
// conductor owns is being inspected. The answer is cached until a local
// write changes a node or port, and for at most a ring refresh (other
// conductors' writes do not reach the cache).
func (c *Conductor) portlessInspection(ctx context.Context) bool {
	gen := c.gate.gen.Load()
	c.gate.mu.Lock()
	if c.gate.portlessOK && c.gate.portlessAt == gen && time.Since(c.gate.portlessWhen) < c.ringRefresh() {
		v := c.gate.portless
		c.gate.mu.Unlock()
		return v
	}
	c.gate.mu.Unlock()
	nodes, err := c.portlessInspecting(ctx)
	if err != nil {
		c.log.WarnContext(ctx, "boot gate: listing inspecting nodes failed", "err", err)
		return false
	}
	nodes = c.owned(nodes)
	c.gate.mu.Lock()
	c.gate.portless, c.gate.portlessAt, c.gate.portlessOK = len(nodes) > 0, gen, true
	c.gate.portlessWhen = time.Now()
	c.gate.mu.Unlock()
	return len(nodes) > 0
}

// portlessInspecting lists the nodes in inspecting or inspect wait that have
// no ports.
func (c *Conductor) portlessInspecting(ctx context.Context) ([]*storage.Node, error) {
	var out []*storage.Node
	for _, st := range []State{Inspecting, InspectWait} {
		s := string(st)
		nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{ProvisionState: &s, IncludeChildren: true})
		if err != nil {
			return nil, err
		}
		for _, n := range nodes {
			node := n.UUID
			ports, err := c.store.ListPorts(ctx, storage.PortQuery{NodeUUID: &node, Page: storage.Page{Limit: 1}})
			if err != nil {
				return nil, err
			}
			if len(ports) == 0 {
				out = append(out, n)
			}
		}
	}
	return out, nil
}

// gateStore invalidates the boot gate's cache after every committed node or
// port write: after the commit, so that a gate read in between cannot cache
// the state from before it. It also reports committed provision state
// changes to the conductor's observer.
type gateStore struct {
	storage.Store
	gate *bootGate
	c    *Conductor
}

func (s gateStore) UpdateNode(ctx context.Context, ident string, fn storage.NodeUpdate) (*storage.Node, error) {
	var last *storage.Event
	// uuid and reserving track what this write holds (orphans.go): begun
	// inside the transaction, before its commit, so that a check of the
	// node's reservation never misses a write about to take it.
	uuid, reserving := "", false
	self := s.c.cfg.Hostname
	n, err := s.Store.UpdateNode(ctx, ident, func(n *storage.Node) (*storage.Event, error) {
		if uuid == "" {
			uuid = n.UUID
			s.c.holds.begin(uuid)
		}
		before := deref(n.Reservation)
		e, err := fn(n)
		last = e // fn may run again on a retry: the last run is what commits
		reserving = err == nil && before != self && deref(n.Reservation) == self
		return e, err
	})
	if uuid != "" {
		s.c.holds.end(uuid, err == nil && n != nil, err == nil && n != nil && deref(n.Reservation) == self, reserving && ambiguous(err))
	}
	s.gate.invalidate()
	if err == nil && n != nil {
		s.c.observe(n.UUID, last)
	}
	return n, err
}

func (s gateStore) CreatePort(ctx context.Context, p *storage.Port) error {
	err := s.Store.CreatePort(ctx, p)
	s.gate.invalidatePorts()
	return err
}

// UpdatePort invalidates too: a port's address may change.
func (s gateStore) UpdatePort(ctx context.Context, uuid string, fn func(p *storage.Port) error) (*storage.Port, error) {
	p, err := s.Store.UpdatePort(ctx, uuid, fn)
	s.gate.invalidatePorts()
	return p, err
}

func (s gateStore) DeletePort(ctx context.Context, uuid string) error {
	err := s.Store.DeletePort(ctx, uuid)
	s.gate.invalidatePorts()
	return err
}

func (s gateStore) DeleteNode(ctx context.Context, uuid string) error {
	err := s.Store.DeleteNode(ctx, uuid)
	s.gate.invalidatePorts()
	if err == nil {
		s.c.forget(uuid)
	}
	return err
}

// RamdiskBoots reports whether the node is in a state that boots its
// ramdisk: only then is its virtual media ISO served.
func (c *Conductor) RamdiskBoots(ctx context.Context, nodeUUID string) bool {
	n, err := c.store.GetNode(ctx, nodeUUID)
	if err != nil {
		return false
	}
	_, ok := bootPurpose[State(n.ProvisionState)]
	return ok
}

func (s gateStore) CreateNode(ctx context.Context, n *storage.Node) error {
	err := s.Store.CreateNode(ctx, n)
	if n.UUID != "" && deref(n.Reservation) == s.c.cfg.Hostname && ambiguous(err) {
		// A node created reserved (discovery) may be stored though the
		// create failed: orphans.go releases it if so.
		s.c.holds.suspect(n.UUID)
	}
	s.gate.invalidate()
	return err
}
