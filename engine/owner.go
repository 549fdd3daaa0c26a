package engine

import (
	"context"
	"maps"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"castiron/engine/ring"
	"castiron/storage"
)

// owners is this conductor's view of who owns which node: Ironic's hash
// rings, one per "conductor_group:hardware type" over the alive conductors
// that enable that hardware type. Every conductor builds the same rings
// from the conductors table, so they agree on each node's owner as soon as
// they have read the same rows (within ringRefresh of a change).
type owners struct {
	mu    sync.RWMutex
	rings map[string]*ring.Ring
	urls  map[string]string // hostname -> API URL, alive conductors only
	built bool
	// byHosts are the distinct rings by their hosts (sorted, NUL-joined),
	// reused by the next refresh when the same hosts serve a key.
	byHosts map[string]*ring.Ring
	// epoch counts the refreshes that changed who serves which key
	// (RingEpoch); ids is what the last one found (key -> hosts).
	epoch atomic.Uint64
	ids   map[string]string
}

// RingEpoch changes (grows) whenever the rings place nodes differently:
// what the API shows as a node's conductor may then have changed although
// no row did.
func (c *Conductor) RingEpoch() uint64 { return c.owners.epoch.Load() }

// WriteGeneration is the store's count of write transactions and whether
// this process is its only writer (storage.DB.WriteGeneration); (0,
// false) for a store that does not count them.
func (c *Conductor) WriteGeneration() (gen uint64, exclusive bool) {
	inner := c.store
	if gs, ok := inner.(gateStore); ok {
		inner = gs.Store
	}
	g, ok := inner.(interface{ WriteGeneration() (uint64, bool) })
	if !ok {
		return 0, false
	}
	return g.WriteGeneration()
}

// ringRefresh bounds how stale a conductor's view of the rings may get
// (Ironic's hash_ring_reset_interval, 15 s by default, bounds the same).
func (c *Conductor) ringRefresh() time.Duration {
	return min(c.cfg.HeartbeatInterval, time.Second)
}

// refreshRings rebuilds the rings from the conductors table. This conductor
// is always on them: it knows it is alive even before its row says so.
func (c *Conductor) refreshRings(ctx context.Context) error {
	cs, err := c.store.ListConductors(ctx, storage.Page{})
	if err != nil {
		return err
	}
	hosts := map[string][]string{}
	urls := map[string]string{}
	add := func(cd *storage.Conductor) {
		urls[cd.Hostname] = cd.APIURL
		for _, d := range append(slices.Clip(cd.Drivers), anyDriver) {
			key := cd.ConductorGroup + ":" + d
			hosts[key] = append(hosts[key], cd.Hostname)
		}
	}
	self := false
	for _, cd := range cs {
		if cd.Hostname == c.cfg.Hostname {
			self = true
			cd = c.selfRow()
		} else if !c.Alive(cd) {
			continue
		}
		add(cd)
	}
	if !self {
		add(c.selfRow())
	}
	rings := make(map[string]*ring.Ring, len(hosts))
	// Keys served by the same hosts share one ring (with one conductor,
	// every driver's), and a refresh that finds the same hosts keeps the
	// ring it had: a ring is 2^exponent md5 sums per host to build.
	c.owners.mu.RLock()
	prev := c.owners.byHosts
	c.owners.mu.RUnlock()
	byHosts := map[string]*ring.Ring{}
	ids := make(map[string]string, len(hosts))
	for key, hs := range hosts {
		set := slices.Compact(slices.Sorted(slices.Values(hs)))
		id := strings.Join(set, "\x00")
		ids[key] = id
		if byHosts[id] == nil {
			byHosts[id] = prev[id]
		}
		if byHosts[id] == nil {
			byHosts[id] = ring.New(set, 1<<c.cfg.HashPartitionExponent)
		}
		rings[key] = byHosts[id]
	}
	c.owners.mu.Lock()
	changed := !c.owners.built || !maps.Equal(ids, c.owners.ids)
	c.owners.rings, c.owners.urls, c.owners.built, c.owners.byHosts, c.owners.ids = rings, urls, true, byHosts, ids
	if changed {
		c.owners.epoch.Add(1)
	}
	c.owners.mu.Unlock()
	return nil
}

// selfRow is this conductor's registration.
func (c *Conductor) selfRow() *storage.Conductor {
	return &storage.Conductor{
		Hostname:       c.cfg.Hostname,
		ConductorGroup: c.cfg.ConductorGroup,
		Drivers:        c.hw.Names(),
		APIURL:         c.cfg.APIURL,
		Online:         true,
		CreatedAt:      c.now(),
	}
}

// ownerOf returns the hostname of n's owner, "" when no alive conductor
// serves n's conductor group and driver.
func (c *Conductor) ownerOf(n *storage.Node) string {
	c.owners.mu.RLock()
	defer c.owners.mu.RUnlock()
	if !c.owners.built {
		// Before Start (tests that never start the conductor): a single
		// conductor's answer.
		if n.ConductorGroup == c.cfg.ConductorGroup {
			if _, ok := c.hw.Get(n.Driver); ok {
				return c.cfg.Hostname
			}
		}
		return ""
	}
	r := c.owners.rings[n.ConductorGroup+":"+n.Driver]
	if r == nil {
		return ""
	}
	return r.Owner(n.UUID)
}

// anyDriver names the ring of all of a group's conductors, which places
// what is not a node (an unknown machine's MAC).
const anyDriver = "*"

// ownsKey reports whether key maps to this conductor on its group's ring.
func (c *Conductor) ownsKey(key string) bool {
	c.owners.mu.RLock()
	defer c.owners.mu.RUnlock()
	if !c.owners.built {
		return true
	}
	r := c.owners.rings[c.cfg.ConductorGroup+":"+anyDriver]
	return r != nil && r.Owner(key) == c.cfg.Hostname
}

// Owns reports whether this conductor owns n: it alone runs n's periodic
// work and answers n's network boot, and verbs on n are sent to it.
func (c *Conductor) Owns(n *storage.Node) bool { return c.ownerOf(n) == c.cfg.Hostname }

// OwnerURL returns the hostname and API URL of n's owner; ok is false when
// no alive conductor serves n.
func (c *Conductor) OwnerURL(n *storage.Node) (host, url string, ok bool) {
	host = c.ownerOf(n)
	if host == "" {
		return "", "", false
	}
	c.owners.mu.RLock()
	defer c.owners.mu.RUnlock()
	return host, c.owners.urls[host], true
}

// AliveConductors returns the hostnames on this conductor's rings, sorted.
func (c *Conductor) AliveConductors() []string {
	c.owners.mu.RLock()
	defer c.owners.mu.RUnlock()
	out := make([]string, 0, len(c.owners.urls))
	for h := range c.owners.urls {
		out = append(out, h)
	}
	sort.Strings(out)
	return out
}

// HostsFor returns the alive conductors that enable hardware type driver,
// in any group, sorted (a driver's "hosts" in the API).
func (c *Conductor) HostsFor(driver string) []string {
	c.owners.mu.RLock()
	defer c.owners.mu.RUnlock()
	if !c.owners.built {
		return []string{c.cfg.Hostname}
	}
	seen := map[string]bool{}
	out := []string{}
	for key, r := range c.owners.rings {
		if _, d, _ := strings.Cut(key, ":"); d != driver {
			continue
		}
		for _, h := range r.Hosts() {
			if !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	sort.Strings(out)
	return out
}

// owned keeps the nodes this conductor owns (in place).
func (c *Conductor) owned(nodes []*storage.Node) []*storage.Node {
	out := nodes[:0]
	for _, n := range nodes {
		if c.Owns(n) {
			out = append(out, n)
		}
	}
	return out
}
