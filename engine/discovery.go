package engine

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
	"castiron/ramdisk/protocol"
	"castiron/storage"
)

// Discovery (Ironic's [auto_discovery]): inspection data that matches no
// node makes a new node in enroll, with plugin_data.auto_discovered set.
// castiron adds what an edge site needs: the BMC address read in-band
// goes into driver_info, a machine booting again is matched by MAC, BMC
// address, system UUID or serial and never enrolled twice, a cap and a
// rate keep a flood of unknown clients from growing the database, and a
// node that has BMC credentials after the rules goes on to manage.

// Defaults of the discovery limits.
const (
	DefaultDiscoveryMaxEnroll = 100
	DefaultDiscoveryRate      = 30 // new nodes per minute (and burst)
	// refusalMemory bounds the MACs whose refusal was logged.
	refusalMemory = 4096
)

// pluginAutoDiscovered is Ironic's AUTO_DISCOVERED_FLAG in the plugin data;
// diiAutoDiscovered marks the node itself (castiron), for the boot gate,
// the UI and `castiron nodes --discovered`.
const (
	pluginAutoDiscovered = "auto_discovered"
	diiAutoDiscovered    = "auto_discovered"
)

// errNoMatch: the inspection data matches no node (a NotFound to the
// ramdisk, a discovery candidate to the conductor).
var errNoMatch = fault.Wrap(fault.NotFound, errors.New("no match"), "Resource could not be found.")

// discovery is the conductor's discovery state: one enrollment at a time
// (so one machine posting twice makes one node), the rate limiter and the
// MACs whose refusal was logged.
type discovery struct {
	mu     sync.Mutex
	tokens float64
	last   time.Time

	refusedMu sync.Mutex
	refused   map[string]bool
}

// allow takes a token of the rate limiter (rate per minute, burst rate).
func (d *discovery) allow(now time.Time, rate float64) bool {
	if d.last.IsZero() {
		d.tokens, d.last = rate, now
	}
	d.tokens = min(rate, d.tokens+now.Sub(d.last).Minutes()*rate)
	d.last = now
	if d.tokens < 1 {
		return false
	}
	d.tokens--
	return true
}

// refuse logs a refusal once per MAC and returns err.
func (c *Conductor) refuse(mac, why string, err error) error {
	c.disc.refusedMu.Lock()
	if c.disc.refused == nil || len(c.disc.refused) >= refusalMemory {
		c.disc.refused = map[string]bool{}
	}
	first := !c.disc.refused[why+mac]
	c.disc.refused[why+mac] = true
	c.disc.refusedMu.Unlock()
	if first {
		c.log.Warn("discovery refused", "mac", mac, "reason", why)
	}
	return err
}

// discovered reports whether the node was made by discovery and still
// waits in enroll: its machine may boot the ramdisk again and its new
// inspection data is applied to it (Ironic accepts data for enroll nodes
// when discovery is on).
func discovered(n *storage.Node) bool {
	auto, _ := n.DriverInternalInfo[diiAutoDiscovered].(bool)
	return auto && State(n.ProvisionState) == Enroll
}

// enrollCount counts the nodes in enroll.
func (c *Conductor) enrollCount(ctx context.Context) (int, error) {
	st := string(Enroll)
	nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{ProvisionState: &st, IncludeChildren: true, Columns: []string{"uuid"}})
	return len(nodes), err
}

// discover finds the node an unmatched inspection belongs to, or makes
// it: a node the machine's other identities name (enroll and discovered:
// inspected again; anything else: refused, castiron never takes over a
// node it was not asked to inspect), else a new node in enroll with its
// ports. The node comes back reserved.
func (c *Conductor) discover(ctx context.Context, in Inspection) (*storage.Node, bool, error) {
	mac := bootMAC(in.Data)
	c.disc.mu.Lock()
	defer c.disc.mu.Unlock()
	// A post racing this one may have enrolled the machine meanwhile.
	if n, err := c.nodeByMACs(ctx, inventoryMACs(in)); err == nil {
		if !discovered(n) {
			return nil, false, errAgentNotFound()
		}
		return n, false, nil
	}
	known, how, err := c.knownMachine(ctx, in)
	if err != nil {
		return nil, false, err
	}
	if known != nil {
		if discovered(known) {
			c.log.Info("discovered machine booted again", "node", known.UUID, "state", known.ProvisionState, "mac", mac, "matched_by", how)
			return known, false, nil
		}
		return nil, false, c.refuse(mac, "the machine is node "+known.UUID+" (by "+how+") in "+known.ProvisionState, errAgentNotFound())
	}
	waiting, err := c.enrollCount(ctx)
	if err != nil {
		return nil, false, err
	}
	if c.cfg.DiscoveryMaxEnroll >= 0 && waiting >= c.cfg.DiscoveryMaxEnroll {
		return nil, false, c.refuse(mac, "cap", fault.New(fault.Unavailable,
			"Discovery is paused: %d nodes wait in enroll (--discovery-max-enroll %d).", waiting, c.cfg.DiscoveryMaxEnroll))
	}
	if !c.disc.allow(time.Now(), c.cfg.DiscoveryRate) {
		return nil, false, c.refuse(mac, "rate", fault.New(fault.Unavailable,
			"Discovery is paused: more than %g new nodes per minute (--discovery-rate).", c.cfg.DiscoveryRate))
	}
	n, err := c.enrollDiscovered(ctx, in)
	if err != nil {
		c.log.Error("discovered machine could not be enrolled", "mac", mac, "err", err)
		return nil, false, err
	}
	return n, true, nil
}

func inventoryMACs(in Inspection) []string {
	var macs []string
	for _, i := range in.Data.Inventory.Interfaces {
		if m, err := NormalizeMAC(i.MACAddress); err == nil {
			macs = append(macs, m)
		}
	}
	return macs
}

// usableBMC is the in-band BMC address when it is a real one.
func usableBMC(p *string) string {
	if p == nil {
		return ""
	}
	a, err := netip.ParseAddr(*p)
	if err != nil || a.IsUnspecified() || a.IsLoopback() {
		return ""
	}
	return a.String()
}

// placeholder are SMBIOS values firmware leaves when nobody set them.
var placeholder = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^(|0+|none|null|n/a|na|not specified|not applicable|to be filled by o\.e\.m\.|default string|system serial number|0123456789|1234567890|chassis serial number|[0f-]+|03000200-0400-0500-0006-000700080009)$`)
})

// identities are what identify the machine besides its MACs.
func identities(inv protocol.Inventory) []storage.Identity {
	var out []storage.Identity
	add := func(kind, v string) {
		v = strings.TrimSpace(v)
		if !placeholder().MatchString(v) {
			out = append(out, storage.Identity{Kind: kind, Value: v})
		}
	}
	for _, p := range []*string{inv.BMCAddress, inv.BMCV6Address} {
		if a := usableBMC(p); a != "" {
			add(storage.IdentityBMCAddress, a)
		}
	}
	if inv.BMCMAC != nil {
		if m, err := NormalizeMAC(*inv.BMCMAC); err == nil && m != "00:00:00:00:00:00" {
			add(storage.IdentityBMCMAC, m)
		}
	}
	add(storage.IdentitySystemUUID, strings.ToLower(inv.SystemVendor.SystemUUID))
	add(storage.IdentitySystemSerial, inv.SystemVendor.SerialNumber)
	return out
}

// knownMachine looks the machine up by its BMC address (what earlier
// inspections read in-band, or any node's driver_info), then its system
// UUID, then its serial. A value several nodes share is no evidence.
func (c *Conductor) knownMachine(ctx context.Context, in Inspection) (*storage.Node, string, error) {
	ids := identities(in.Data.Inventory)
	for _, kind := range []string{storage.IdentityBMCAddress, storage.IdentitySystemUUID, storage.IdentitySystemSerial} {
		for _, id := range ids {
			if id.Kind != kind {
				continue
			}
			nodes, err := c.store.NodesWithIdentity(ctx, id)
			if err != nil {
				return nil, "", err
			}
			if kind == storage.IdentityBMCAddress {
				byInfo, err := c.nodesByBMCAddress(ctx, id.Value)
				if err != nil {
					return nil, "", err
				}
				nodes = appendNew(nodes, byInfo...)
			}
			if len(nodes) == 1 {
				n, err := c.store.GetNode(ctx, nodes[0])
				if err != nil {
					return nil, "", err
				}
				return n, kind + " " + id.Value, nil
			}
		}
	}
	return nil, "", nil
}

func appendNew(list []string, more ...string) []string {
	for _, m := range more {
		dup := false
		for _, l := range list {
			dup = dup || l == m
		}
		if !dup {
			list = append(list, m)
		}
	}
	return list
}

// nodesByBMCAddress lists the nodes whose driver_info names this BMC.
func (c *Conductor) nodesByBMCAddress(ctx context.Context, addr string) ([]string, error) {
	nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{IncludeChildren: true, Columns: []string{"driver_info"}})
	if err != nil {
		return nil, err
	}
	var out []string
	for _, n := range nodes {
		if h := strings.Trim(bmcAddressOf(n), "[]"); h != "" {
			if host, _, err := net.SplitHostPort(h); err == nil {
				h = host
			}
			if h == addr {
				out = append(out, n.UUID)
			}
		}
	}
	return out, nil
}

// discoveredName is the node name the inventory gives: its hostname, else
// its serial number, made a valid Ironic name; "" when neither is usable.
func discoveredName(inv protocol.Inventory) string {
	for _, cand := range []string{inv.Hostname, inv.SystemVendor.SerialNumber} {
		cand = strings.TrimSpace(cand)
		switch strings.ToLower(cand) {
		case "", "localhost", "localhost.localdomain", "(none)", "ubuntu", "debian", "ipa", "castiron-agent":
			continue
		}
		if placeholder().MatchString(cand) {
			continue
		}
		name := invalidNameChars().ReplaceAllString(cand, "-")
		if len(name) > 63 {
			name = name[:63]
		}
		return name
	}
	return ""
}

var invalidNameChars = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`[^A-Za-z0-9._~-]`) })

// discoveredDriverInfo is what the in-band data gives the new node's
// driver: the BMC's address (ipmi_address, or redfish_address for
// redfish).
func discoveredDriverInfo(driverName string, inv protocol.Inventory) storage.JSONObject {
	info := storage.JSONObject{}
	addr := usableBMC(inv.BMCAddress)
	if addr == "" {
		addr = usableBMC(inv.BMCV6Address)
	}
	if addr == "" {
		return info
	}
	switch driverName {
	case "ipmi":
		info["ipmi_address"] = addr
	case "redfish":
		if strings.Contains(addr, ":") {
			addr = "[" + addr + "]"
		}
		info["redfish_address"] = "https://" + addr
	}
	return info
}

// enrollDiscovered creates the node for a machine nobody enrolled, with
// its ports, reserved for the inspection task that follows.
func (c *Conductor) enrollDiscovered(ctx context.Context, in Inspection) (*storage.Node, error) {
	inv := in.Data.Inventory
	driverName := c.cfg.DiscoveryDriver
	hw, ok := c.hw.Get(driverName)
	if !ok {
		return nil, unknownDriver(driverName, c.cfg.ConductorGroup)
	}
	n := &storage.Node{
		UUID:               uuid.NewString(),
		Driver:             driverName,
		ConductorGroup:     c.cfg.ConductorGroup,
		DriverInfo:         discoveredDriverInfo(driverName, inv),
		DriverInternalInfo: storage.JSONObject{diiAutoDiscovered: true},
		Reservation:        strp(c.cfg.Hostname),
	}
	if c.cfg.DiscoveryBMCUser != "" && bmcUserDrivers[driverName] {
		n.DriverInternalInfo[diiBMCUser] = bmcUserPending
	}
	// The ramdisk inspects: later re-inspections go the same way.
	if hw.Enabled("inspect", "agent") {
		n.InspectInterface = "agent"
	}
	if name := discoveredName(inv); name != "" {
		if _, err := c.store.GetNode(ctx, name); err == nil {
			mac := strings.ReplaceAll(bootMAC(in.Data), ":", "")
			name = fmt.Sprintf("%s-%s", name, mac[max(0, len(mac)-6):])
		}
		if _, err := c.store.GetNode(ctx, name); fault.Is(err, fault.NotFound) {
			n.Name = &name
		}
	}
	if err := c.CreateNode(ctx, n, true); err != nil {
		return nil, err
	}
	if _, err := c.portsFromInventory(ctx, n, inv, bootMAC(in.Data)); err != nil {
		return nil, fmt.Errorf("ports of discovered node %s: %w", n.UUID, err)
	}
	bmc := usableBMC(inv.BMCAddress)
	e := c.discoveryEvent(n, "INFO", fmt.Sprintf("Discovered: machine with MACs %s, BMC %s, serial %q enrolled with driver %s",
		strings.Join(inventoryMACs(in), ", "), orNone(bmc), inv.SystemVendor.SerialNumber, driverName))
	if err := c.store.AddEvent(ctx, e); err != nil {
		c.log.Warn("recording a discovery failed", "node", n.UUID, "err", err)
	}
	c.log.Info("machine discovered", "node", n.UUID, "state", n.ProvisionState, "verb", "discover",
		"mac", bootMAC(in.Data), "bmc", orNone(bmc), "driver", driverName)
	return n, nil
}

// discoveryEvent is a history event of discovery (the agent's doing:
// castiron acts on what the machine's ramdisk sent).
func (c *Conductor) discoveryEvent(n *storage.Node, severity, msg string) *storage.Event {
	return &storage.Event{
		NodeUUID: n.UUID, CreatedAt: c.now(), Conductor: c.cfg.Hostname,
		EventType: "discovery", Severity: severity, User: "agent", Verb: "discover",
		Event: msg, FromState: n.ProvisionState, ToState: n.ProvisionState,
	}
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// discoveryTask is the inspection of a discovered node: ports for any new
// NIC, properties, rules, inventory; the node stays in enroll (a failure
// is its last_error, the node is kept). Then, when it has BMC credentials
// (from a rule or the BMC user) or --discovery-manage is on, it goes on to
// manage, which verifies them out of band.
func discoveryTask(in Inspection) work {
	return func(ctx context.Context, c *Conductor, n *storage.Node) outcome {
		if _, err := c.portsFromInventory(ctx, n, in.Data.Inventory, bootMAC(in.Data)); err != nil {
			return discoveryFailed(c, fmt.Errorf("Failed to create ports from the inventory: %v", err))
		}
		in.PluginData[pluginAutoDiscovered] = true
		plugin, err := c.inspectedNode(ctx, n.UUID, in, c.inspectOverwrite(n))
		if err != nil {
			return discoveryFailed(c, fmt.Errorf("Failed to finish inspection: %v", err))
		}
		return outcome{
			mutate: func(n *storage.Node) {
				// The agent stays: its heartbeats get the BMC user step and
				// the power off (castiron has no credentials to power off).
				now := c.now()
				n.InspectionFinishedAt = &now
				n.LastError = nil
				n.DriverInternalInfo[InventoryKey] = map[string]any{"inventory": in.Inventory, "plugin_data": plugin}
			},
			then: func(ctx context.Context, n *storage.Node) {
				// With a BMC user to set up, the agent's next heartbeat
				// asks for it and moves the node on once it is done.
				if n.DriverInternalInfo[diiBMCUser] != bmcUserPending {
					c.autoManage(ctx, n)
				}
			},
		}
	}
}

func discoveryFailed(c *Conductor, err error) outcome {
	return outcome{err: err, mutate: func(n *storage.Node) {
		now := c.now()
		n.InspectionFinishedAt = &now
		n.LastError = strp(err.Error())
	}}
}

// hasBMCCredentials: driver_info names a BMC user or password.
func hasBMCCredentials(n *storage.Node) bool {
	for k, v := range n.DriverInfo {
		if s, ok := v.(string); ok && s != "" && (strings.HasSuffix(k, "_username") || strings.HasSuffix(k, "_password")) {
			return true
		}
	}
	return false
}

// autoManage moves a discovered node on to manage when it can be managed.
func (c *Conductor) autoManage(ctx context.Context, n *storage.Node) {
	if !discovered(n) || n.Reservation != nil || !(c.cfg.DiscoveryManage || hasBMCCredentials(n)) {
		return
	}
	err := c.Provision(WithActor(ctx, "conductor"), n.UUID, ProvisionRequest{Target: "manage"})
	if err != nil {
		c.log.Warn("discovered node not moved to manage", "node", n.UUID, "state", n.ProvisionState, "err", err)
		return
	}
	c.log.Info("discovered node goes to manage", "node", n.UUID, "state", n.ProvisionState, "verb", "manage")
}
