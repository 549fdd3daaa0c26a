package engine

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"castiron/storage"
)

// recover runs at start-up, before any request: it releases reservations a
// killed conductor left, fails nodes whose work cannot resume (Ironic's
// STUCK_STATES_TREATED_AS_FAIL) and clears pending power operations. Nodes in
// wait states keep their deadlines: provision_updated_at is durable. With
// several conductors it touches only what this one held or owns: another
// conductor's node in a stuck state is work in flight there.
func (c *Conductor) recover(ctx context.Context) error {
	held, err := c.store.ReleaseAllReservations(ctx, c.cfg.Hostname)
	if err != nil {
		return err
	}
	if len(held) > 0 {
		c.log.WarnContext(ctx, "released reservations left by a previous run", "count", len(held))
	}
	mine := make(map[string]bool, len(held))
	for _, u := range held {
		mine[u] = true
	}
	ours := func(n *storage.Node) bool { return mine[n.UUID] || (n.Reservation == nil && c.Owns(n)) }
	// One query for every state an interrupted task leaves behind, one for
	// pending power operations: a restart reads only the nodes it recovers.
	stuck := []string{}
	for st, info := range states {
		if info.StuckFails {
			stuck = append(stuck, string(st))
		}
	}
	nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{
		ProvisionStates: stuck,
		ConductorGroups: []string{c.cfg.ConductorGroup},
		IncludeChildren: true,
	})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if !ours(n) {
			continue
		}
		msg := fmt.Sprintf("The conductor %s was restarted while node %s was in state %q; the operation was interrupted.", c.cfg.Hostname, n.UUID, n.ProvisionState)
		if err := c.failIfIn(ctx, n.UUID, State(n.ProvisionState), msg); err != nil {
			return err
		}
	}
	// Pending power operations died with the process.
	pending := true
	nodes, err = c.store.ListNodes(ctx, storage.NodeQuery{ConductorGroups: []string{c.cfg.ConductorGroup}, IncludeChildren: true, PowerPending: &pending})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if !ours(n) {
			continue
		}
		err := c.dropPendingPower(ctx, n.UUID, c.cfg.Hostname)
		if err != nil {
			return err
		}
	}
	return nil
}

// failIfIn fires EvFail on the node if it is still in st and nobody has
// reserved it since its reservation was released, with msg as last_error.
func (c *Conductor) failIfIn(ctx context.Context, uuid string, st State, msg string) error {
	_, err := c.store.UpdateNode(ctx, uuid, func(n *storage.Node) (*storage.Event, error) {
		if State(n.ProvisionState) != st || !Actionable(st, EvFail) || n.Reservation != nil {
			return nil, nil
		}
		n.Reservation = nil
		c.log.WarnContext(ctx, "failing node", "node", n.UUID, "state", n.ProvisionState, "verb", "fail", "reason", msg)
		return c.fire(ctx, n, EvFail, noTargetState, &msg), nil
	})
	return err
}

// checkTimeouts fails nodes that waited for the ramdisk longer than
// CallbackTimeout (Ironic's *_callback_timeout periodic tasks).
func (c *Conductor) checkTimeouts(ctx context.Context) error {
	now := c.now()
	for st, info := range states {
		if !info.WaitsForCallback {
			continue
		}
		state := string(st)
		nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{
			ProvisionState:  &state,
			Reserved:        boolp(false),
			ConductorGroups: []string{c.cfg.ConductorGroup},
			IncludeChildren: true,
		})
		if err != nil {
			return err
		}
		for _, n := range c.owned(nodes) {
			limit := c.waitTimeout(n, st)
			if n.ProvisionUpdatedAt == nil || now.Sub(*n.ProvisionUpdatedAt) < limit {
				continue
			}
			msg := fmt.Sprintf("Timeout reached while waiting for callback for node %s in state %q (%s).", n.UUID, state, limit)
			failedNode, err := c.failTimedOut(ctx, n.UUID, st, now, msg)
			if err != nil {
				return err
			}
			if failedNode != nil {
				// The node stays reserved until the power off is done, as
				// Ironic holds the task lock through cleanup_after_timeout.
				c.runTask(ctx, failedNode, "timeout", abortTask(st))
			}
		}
	}
	return nil
}

// failTimedOut fires EvFail on a node whose wait in st has passed its
// deadline, re-checked under the write lock (the agent may have called back,
// or a request may hold the node, since the listing), and reserves it for
// the clean-up. It returns the node as written, or nil when nothing fired.
func (c *Conductor) failTimedOut(ctx context.Context, uuid string, st State, now time.Time, msg string) (*storage.Node, error) {
	fired := false
	updated, err := c.store.UpdateNode(ctx, uuid, func(n *storage.Node) (*storage.Event, error) {
		fired = false
		if State(n.ProvisionState) != st || n.Reservation != nil || !Actionable(st, EvFail) ||
			n.ProvisionUpdatedAt == nil || now.Sub(*n.ProvisionUpdatedAt) < c.cfg.CallbackTimeout {
			return nil, nil
		}
		fired = true
		n.Reservation = strp(c.cfg.Hostname)
		c.log.WarnContext(ctx, "failing node", "node", n.UUID, "state", n.ProvisionState, "verb", "fail", "reason", msg)
		return c.fire(ctx, n, EvFail, noTargetState, &msg), nil
	})
	if err != nil || !fired {
		return nil, err
	}
	return updated, nil
}

// takeOverDead releases what conductors that stopped heartbeating still hold
// (a conductor renamed across a crash leaves its old name's reservations
// behind): stuck nodes fail, pending power changes are dropped, unfinished
// allocations are adopted, and a dead row is marked offline. Like Ironic's
// orphan check, "stopped heartbeating" is the heartbeat's age, online or not:
// a conductor stopped with SIGTERM marks itself offline but leaves the
// reservations of the tasks the stop interrupted, for its own restart, and
// if it never comes back the others must release them. A conductor that
// just died looks alive for up to HeartbeatTimeout, so this runs
// periodically, not only at start-up; each stale heartbeat is handled once.
func (c *Conductor) takeOverDead(ctx context.Context) error {
	cs, err := c.store.ListConductors(ctx, storage.Page{})
	if err != nil {
		return err
	}
	for _, cd := range cs {
		last := cd.CreatedAt
		if cd.UpdatedAt != nil {
			last = *cd.UpdatedAt
		}
		if cd.Hostname == c.cfg.Hostname || c.now().Sub(last) < c.cfg.HeartbeatTimeout || c.tookOver.done(cd.Hostname, last) {
			continue
		}
		held, err := c.store.ReleaseAllReservations(ctx, cd.Hostname)
		if err != nil {
			return err
		}
		for _, uuid := range held {
			n, err := c.store.GetNode(ctx, uuid)
			if err != nil {
				continue // deleted meanwhile
			}
			st := State(n.ProvisionState)
			if states[st].StuckFails {
				msg := fmt.Sprintf("The conductor %s stopped heartbeating while node %s was in state %q; the operation was interrupted.", cd.Hostname, n.UUID, st)
				if err := c.failIfIn(ctx, n.UUID, st, msg); err != nil {
					return err
				}
			}
			if err := c.dropPendingPower(ctx, n.UUID, cd.Hostname); err != nil {
				return err
			}
		}
		if err := c.adoptAllocations(ctx, cd.Hostname); err != nil {
			return err
		}
		if cd.Online || len(held) > 0 {
			c.log.WarnContext(ctx, "took over from a dead conductor", "dead", cd.Hostname, "released", len(held))
		}
		if cd.Online {
			if err := c.store.UnregisterConductor(ctx, cd.Hostname); err != nil {
				return err
			}
		}
		c.tookOver.mark(cd.Hostname, last)
	}
	return nil
}

// tookOver remembers, per stale conductor, the last heartbeat this conductor
// has taken over from, so a dead or stopped conductor's row is handled once.
type tookOver struct {
	mu   sync.Mutex
	last map[string]time.Time
}

func (t *tookOver) done(host string, last time.Time) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	at, ok := t.last[host]
	return ok && at.Equal(last)
}

func (t *tookOver) mark(host string, last time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.last == nil {
		t.last = map[string]time.Time{}
	}
	t.last[host] = last
}

// dropPendingPower clears a power change that died with conductor host.
func (c *Conductor) dropPendingPower(ctx context.Context, uuid, host string) error {
	_, err := c.store.UpdateNode(ctx, uuid, func(cur *storage.Node) (*storage.Event, error) {
		if cur.TargetPowerState == nil {
			return nil, nil
		}
		msg := fmt.Sprintf("Pending power operation to %q was aborted because the conductor %s stopped or restarted.", *cur.TargetPowerState, host)
		cur.TargetPowerState = nil
		cur.LastError = &msg
		return c.powerEvent(ctx, cur, "recovery", "ERROR", msg), nil
	})
	return err
}

// waitTimeout is how long n may stay in the wait state st without news from
// its ramdisk: driver_info inspect_wait_timeout (seconds) for inspection,
// else the global callback timeout.
func (c *Conductor) waitTimeout(n *storage.Node, st State) time.Duration {
	if st == InspectWait {
		switch v := n.DriverInfo["inspect_wait_timeout"].(type) {
		case float64:
			if v > 0 {
				return time.Duration(v * float64(time.Second))
			}
		case string:
			if secs, err := strconv.ParseFloat(v, 64); err == nil && secs > 0 {
				return time.Duration(secs * float64(time.Second))
			}
		}
	}
	return c.cfg.CallbackTimeout
}
