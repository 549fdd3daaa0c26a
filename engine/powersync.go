package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"castiron/engine/driver"
	"castiron/fault"
	"castiron/storage"
)

// DefaultPowerSyncWorkers is Config.PowerSyncWorkers' default: with BMCs
// answering in 20-50 ms and kept sessions, 100 reads in flight cover 10,000
// nodes in well under a minute (a first read, which sets a session up,
// costs 6 round trips).
const DefaultPowerSyncWorkers = 100

// faultPowerFailure is Ironic's faults.POWER_FAILURE.
const faultPowerFailure = "power failure"

// syncExcluded are Ironic's SYNC_EXCLUDED_STATES: a read there could race a
// ramdisk's call-back, and an enrolled node's credentials are unproven.
var syncExcluded = map[State]bool{DeployWait: true, CleanWait: true, Enroll: true, AdoptFail: true}

// powerSync is the power sync's memory between passes: consecutive failed
// reads per node (Ironic's power_state_sync_count, also kept in memory).
type powerSync struct {
	mu    sync.Mutex
	fails map[string]int
}

func (p *powerSync) failures(uuid string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.fails[uuid]
}

func (p *powerSync) set(uuid string, n int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n == 0 {
		delete(p.fails, uuid)
		return
	}
	if p.fails == nil {
		p.fails = map[string]int{}
	}
	p.fails[uuid] = n
}

// forgetExcept drops the counts of nodes that are gone (deleted, moved to
// another conductor), so the map follows the fleet.
func (p *powerSync) forgetExcept(keep map[string]bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for u := range p.fails {
		if !keep[u] {
			delete(p.fails, u)
		}
	}
}

// syncColumns are what a BMC read needs: this runs every minute over the
// fleet.
var syncColumns = []string{"uuid", "driver", "conductor_group", "power_interface", "provision_state", "power_state",
	"driver_info", "driver_internal_info", "properties", "boot_mode", "management_interface", "health", "disable_power_off"}

// syncPowerStates reads every idle node's power state from its BMC and
// records changes and failures (Ironic's _sync_power_states and
// do_sync_power_state). Reads run concurrently, bounded overall and per BMC
// address, each bounded in time, so a slow or dead BMC delays no other.
// Fake drivers are skipped.
func (c *Conductor) syncPowerStates(ctx context.Context) error {
	nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{
		Maintenance:     boolp(false),
		Reserved:        boolp(false),
		PowerPending:    boolp(false),
		ConductorGroups: []string{c.cfg.ConductorGroup},
		IncludeChildren: true,
		Columns:         syncColumns,
	})
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var todo []*storage.Node
	for _, n := range c.owned(nodes) {
		seen[n.UUID] = true
		if n.PowerInterface == "fake" || syncExcluded[State(n.ProvisionState)] {
			continue
		}
		todo = append(todo, n)
	}
	c.psync.forgetExcept(seen)
	// Failing nodes first, to fail them fast (as Ironic orders its queue).
	slices.SortStableFunc(todo, func(a, b *storage.Node) int {
		return cmp.Compare(c.psync.failures(b.UUID), c.psync.failures(a.UUID))
	})
	start := time.Now()
	c.readBMCs(ctx, todo, c.syncOne)
	c.closeIdleBMCSessions(ctx, time.Since(start))
	return nil
}

// readBMCs runs fn for every node, at most PowerSyncWorkers at once and
// PowerSyncPerBMC per BMC address. Nodes are grouped by BMC and each group
// split into PowerSyncPerBMC lanes; a worker takes a lane and runs its
// nodes in order, so no worker ever waits for a busy BMC.
func (c *Conductor) readBMCs(ctx context.Context, nodes []*storage.Node, fn func(context.Context, *storage.Node)) {
	if len(nodes) == 0 {
		return
	}
	per := c.cfg.PowerSyncPerBMC
	groups := map[string][]*storage.Node{}
	var order []string
	for _, n := range nodes {
		k := c.bmcAddress(n)
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], n)
	}
	lanes := make(chan []*storage.Node, len(nodes))
	for _, k := range order {
		g := groups[k]
		nl := min(per, len(g))
		split := make([][]*storage.Node, nl)
		for i, n := range g {
			split[i%nl] = append(split[i%nl], n)
		}
		for _, l := range split {
			lanes <- l
		}
	}
	close(lanes)
	var wg sync.WaitGroup
	for range min(c.cfg.PowerSyncWorkers, len(lanes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lane := range lanes {
				for _, n := range lane {
					if ctx.Err() != nil {
						return
					}
					fn(ctx, n)
				}
			}
		}()
	}
	wg.Wait()
}

// bmcAddress names the BMC a node's calls go to; a node whose driver
// cannot say is its own BMC.
func (c *Conductor) bmcAddress(n *storage.Node) string {
	if hw, err := c.hardwareOf(n); err == nil {
		if a, ok := unwrapPower(hw.Power).(driver.BMCAddresser); ok {
			if addr := a.BMCAddress(driverNode(n)); addr != "" {
				return n.Driver + "|" + addr
			}
		}
	}
	return "node|" + n.UUID
}

// readPower is one bounded BMC read of the power state and, where the
// node's management interface reads health (API 1.109) and the driver
// returns both from one exchange, the health too (read is then true).
func (c *Conductor) readPower(ctx context.Context, hw *HardwareType, n *storage.Node) (ps, health string, read bool, err error) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.PowerSyncTimeout)
	defer cancel()
	phr, both := unwrapPower(hw.Power).(driver.PowerHealthReader)
	if _, ok := managementFeature[driver.HealthReader](n, hw); both && ok {
		ps, health, err = phr.PowerStateHealth(rctx, driverNode(n))
		read = err == nil
	} else {
		ps, err = hw.Power.PowerState(rctx, driverNode(n))
	}
	if err == nil && ps == driver.PowerStateError {
		err = errors.New("Power driver returned ERROR state while trying to sync power state.")
	}
	return ps, health, read, err
}

// syncOne is Ironic's do_sync_power_state for one node.
func (c *Conductor) syncOne(ctx context.Context, n *storage.Node) {
	hw, err := c.hardwareOf(n)
	if err != nil {
		return
	}
	// Without a known state and with driver_info that cannot work, there
	// is nothing to sync (Ironic returns 0 here).
	if n.PowerState == nil {
		if err := hw.Power.Validate(driverNode(n)); err != nil {
			c.psync.set(n.UUID, 0)
			return
		}
	}
	count := c.psync.failures(n.UUID) + 1
	max := c.cfg.PowerSyncMaxRetries
	ps, health, healthRead, err := c.readPower(ctx, hw, n)
	if ctx.Err() != nil {
		return // stopping: not the BMC's fault
	}
	log := c.log.With("node", n.UUID, "state", n.ProvisionState, "verb", "power-sync")
	if err == nil {
		// Health (API 1.109) is read with the power state, as Ironic does.
		var herr error
		if healthRead {
			herr = c.recordHealth(ctx, n, health)
		} else {
			herr = c.syncHealth(ctx, n, hw)
		}
		if herr != nil && !fault.Is(herr, fault.NotFound) {
			log.WarnContext(ctx, "power sync: cannot record health", "err", herr)
		}
	}
	if err != nil {
		c.psync.set(n.UUID, count)
		if max >= 0 && count > max {
			c.powerSyncGiveUp(ctx, n, nil, err)
			return
		}
		log.WarnContext(ctx, "power sync: cannot read power state", "attempt", count, "retries", max, "err", err)
		return
	}
	if n.PowerState != nil && *n.PowerState == ps {
		c.psync.set(n.UUID, 0)
		return
	}
	if max >= 0 && count > max && n.PowerState != nil {
		// The state kept changing behind castiron's back on every pass.
		c.psync.set(n.UUID, count)
		c.powerSyncGiveUp(ctx, n, &ps, nil)
		return
	}
	recorded := false
	_, err = c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		// The same checks again, on the row as it is now.
		if cur.Reservation != nil || cur.TargetPowerState != nil || cur.Maintenance || syncExcluded[State(cur.ProvisionState)] {
			return nil, nil // a task started meanwhile; it owns the state
		}
		if cur.PowerState != nil && *cur.PowerState == ps {
			return nil, nil
		}
		msg := fmt.Sprintf("power state changed outside castiron: %s -> %s", powerStateWord(cur), ps)
		if cur.PowerState == nil {
			msg = fmt.Sprintf("node has no previous known power state, recording %s", ps)
		}
		cur.PowerState = strp(ps)
		recorded = true
		return c.powerEvent(ctx, cur, "power-sync", "INFO", msg), nil
	})
	if err != nil {
		if !fault.Is(err, fault.NotFound) {
			log.WarnContext(ctx, "power sync: cannot record power state", "err", err)
		}
		return
	}
	if n.PowerState == nil {
		c.psync.set(n.UUID, 0)
	} else {
		c.psync.set(n.UUID, count) // Ironic counts a mismatch too
	}
	if recorded {
		log.InfoContext(ctx, "power state synced", "power_state", ps)
	}
}

// powerSyncGiveUp is Ironic's handle_sync_power_state_max_retries_exceeded:
// the recorded power state becomes what was read (None after failed reads),
// and the node goes to maintenance with fault "power failure".
func (c *Conductor) powerSyncGiveUp(ctx context.Context, n *storage.Node, actual *string, readErr error) {
	_, err := c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
		if cur.Reservation != nil || cur.TargetPowerState != nil || cur.Maintenance || syncExcluded[State(cur.ProvisionState)] {
			return nil, nil
		}
		actualWord := "None"
		if actual != nil {
			actualWord = *actual
		}
		msg := fmt.Sprintf("During sync_power_state, max retries exceeded for node %s, node state %s does not match expected state '%s'. Updating DB state to '%s' Switching node to maintenance mode.",
			cur.UUID, actualWord, powerStateWord(cur), actualWord)
		if readErr != nil {
			msg += " Error: " + readErr.Error()
		}
		cur.PowerState = actual
		cur.Maintenance = true
		cur.MaintenanceReason = strp(msg)
		cur.Fault = strp(faultPowerFailure)
		cur.LastError = strp(msg)
		ev := c.powerEvent(ctx, cur, "power-sync", "ERROR", msg)
		ev.EventType = "monitoring"
		return ev, nil
	})
	if err != nil && !fault.Is(err, fault.NotFound) {
		c.log.WarnContext(ctx, "power sync: cannot record power failure", "node", n.UUID, "err", err)
		return
	}
	c.log.ErrorContext(ctx, "power sync: node put in maintenance for power failure", "node", n.UUID,
		"state", n.ProvisionState, "verb", "power-sync", "err", readErr)
}

// recoverPowerFailures is Ironic's _power_failure_recovery: nodes in
// maintenance for a power failure whose BMC answers again get the power
// state read and leave maintenance.
func (c *Conductor) recoverPowerFailures(ctx context.Context) error {
	nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{
		Maintenance:     boolp(true),
		Fault:           strp(faultPowerFailure),
		Reserved:        boolp(false),
		PowerPending:    boolp(false),
		ConductorGroups: []string{c.cfg.ConductorGroup},
		IncludeChildren: true,
		Columns:         syncColumns,
	})
	if err != nil {
		return err
	}
	var todo []*storage.Node
	for _, n := range c.owned(nodes) {
		if n.PowerInterface != "fake" && State(n.ProvisionState) != Enroll {
			todo = append(todo, n)
		}
	}
	c.readBMCs(ctx, todo, func(ctx context.Context, n *storage.Node) {
		hw, err := c.hardwareOf(n)
		if err != nil || hw.Power.Validate(driverNode(n)) != nil {
			return
		}
		ps, _, _, err := c.readPower(ctx, hw, n)
		if err != nil {
			c.log.DebugContext(ctx, "power failure recovery: BMC still fails", "node", n.UUID, "err", err)
			return
		}
		_, err = c.store.UpdateNode(ctx, n.UUID, func(cur *storage.Node) (*storage.Event, error) {
			if !cur.Maintenance || deref(cur.Fault) != faultPowerFailure || cur.Reservation != nil ||
				cur.TargetPowerState != nil || State(cur.ProvisionState) == Enroll {
				return nil, nil
			}
			cur.PowerState = strp(ps)
			cur.Maintenance = false
			cur.MaintenanceReason = nil
			cur.Fault = nil
			msg := fmt.Sprintf("Node %s is recovered from power failure with actual power state '%s'.", cur.UUID, ps)
			ev := c.powerEvent(ctx, cur, "power-sync", "INFO", msg)
			ev.EventType = "monitoring"
			return ev, nil
		})
		if err != nil {
			if !fault.Is(err, fault.NotFound) {
				c.log.WarnContext(ctx, "power failure recovery: cannot record", "node", n.UUID, "err", err)
			}
			return
		}
		c.psync.set(n.UUID, 0)
		c.log.InfoContext(ctx, "node recovered from power failure", "node", n.UUID, "power_state", ps)
	})
	return nil
}

// sessionKeepers are the distinct power drivers that keep BMC sessions.
func (c *Conductor) sessionKeepers() []driver.SessionKeeper {
	var out []driver.SessionKeeper
	seen := map[driver.SessionKeeper]bool{}
	for _, name := range c.hw.Names() {
		hw, _ := c.hw.Get(name)
		if k, ok := unwrapPower(hw.Power).(driver.SessionKeeper); ok && !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	return out
}

// closeIdleBMCSessions closes sessions no pass used lately: their nodes
// are gone, elsewhere or in maintenance. "Lately" follows the pass as well
// as the interval: a pass longer than the interval (a fleet too large for
// the workers) would otherwise close, before their next read, the sessions
// of the nodes it read first, and set up a session for almost every read
// (bench/fleet pg1: 5.2 packets a read instead of 1.07).
func (c *Conductor) closeIdleBMCSessions(ctx context.Context, pass time.Duration) {
	idle := 2*c.cfg.PowerSyncInterval + c.cfg.PowerSyncTimeout + 2*pass
	for _, k := range c.sessionKeepers() {
		k.CloseIdleSessions(ctx, idle)
	}
}

// closeBMCSessions closes every kept session (Stop), so the BMCs get their
// session slots back at once rather than after their inactivity timeout.
func (c *Conductor) closeBMCSessions(ctx context.Context) {
	for _, k := range c.sessionKeepers() {
		k.CloseSessions(ctx)
	}
}

// unwrapPower is the driver behind a metered power interface.
func unwrapPower(p driver.Power) driver.Power {
	if mp, ok := p.(meteredPower); ok {
		return mp.Power
	}
	return p
}
