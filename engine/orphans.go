package engine

import (
	"context"
	"fmt"
	"sync"

	"castiron/fault"
	"castiron/storage"
)

// Orphaned reservations. A write that reserves a node (a verb's) can fail
// after its COMMIT reached the PostgreSQL server, when the connection breaks
// before the answer: the API answers 503 and starts no task, yet the node
// is reserved by this conductor, which is alive, so neither restart
// recovery nor another conductor's takeover would ever release it.
// Ironic releases its own stale reservations only at conductor start; this
// check is castiron's addition. After such an ambiguous failure the node is
// a suspect; a periodic job re-reads it once the database answers and, if
// this conductor's reservation is there but no write of this conductor
// holds it (holds), releases it as restart recovery would: an interrupted
// state fails, a pending power change is dropped. A reservation that a
// running task holds is never released: every reservation this conductor
// takes goes through gateStore.UpdateNode, which records it in holds from
// inside the transaction, before its commit, until a later write drops it.

// holds is what this conductor's node writes hold, per node UUID.
type holds struct {
	mu       sync.Mutex
	inflight map[string]int  // node writes under way (fn has run, not yet returned)
	held     map[string]bool // last committed write left the node reserved by us
	suspects map[string]bool // a reserving write failed ambiguously
}

func (h *holds) init() {
	if h.inflight == nil {
		h.inflight, h.held, h.suspects = map[string]int{}, map[string]bool{}, map[string]bool{}
	}
}

func (h *holds) begin(uuid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	h.inflight[uuid]++
}

func (h *holds) suspect(uuid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.init()
	h.suspects[uuid] = true
}

// end records a node write's outcome: reserved tells whether the committed
// node is reserved by us; suspect, that it may have been reserved by a
// write whose outcome is unknown.
func (h *holds) end(uuid string, committed, reserved, suspect bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.inflight[uuid]--; h.inflight[uuid] <= 0 {
		delete(h.inflight, uuid)
	}
	switch {
	case committed && reserved:
		h.held[uuid] = true
	case committed:
		delete(h.held, uuid)
	case suspect:
		h.suspects[uuid] = true
	}
}

// busy reports whether a write of ours other than the caller's (which is
// under way itself) holds or may be taking the node's reservation.
func (h *holds) busy(uuid string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[uuid] || h.inflight[uuid] > 1
}

func (h *holds) suspected() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, 0, len(h.suspects))
	for u := range h.suspects {
		out = append(out, u)
	}
	return out
}

func (h *holds) clear(uuid string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.suspects, uuid)
}

// ambiguous reports whether a failed write may nevertheless be stored: the
// database server went away during it.
func ambiguous(err error) bool {
	return err != nil && (fault.Is(err, fault.Unavailable) || storage.Unreachable(err))
}

// releaseOrphans re-reads the suspects and releases the reservations of
// ours that no write of ours holds. It keeps a suspect while the database
// does not answer.
func (c *Conductor) releaseOrphans(ctx context.Context) error {
	for _, uuid := range c.holds.suspected() {
		n, err := c.store.GetNode(ctx, uuid)
		if fault.Is(err, fault.NotFound) {
			c.holds.clear(uuid)
			continue
		}
		if err != nil {
			return err
		}
		if deref(n.Reservation) != c.cfg.Hostname || c.holds.busy(uuid) {
			// Never stored, released since, or a task of ours holds it now.
			c.holds.clear(uuid)
			continue
		}
		released, retry := false, false
		_, err = c.store.UpdateNode(ctx, uuid, func(cur *storage.Node) (*storage.Event, error) {
			released, retry = false, false
			if deref(cur.Reservation) != c.cfg.Hostname {
				return nil, nil
			}
			// Re-checked under the write: a write of ours that began since
			// may be reserving it for a task.
			if c.holds.busy(cur.UUID) {
				retry = true
				return nil, nil
			}
			released = true
			cur.Reservation = nil
			var e *storage.Event
			st := State(cur.ProvisionState)
			if states[st].StuckFails && Actionable(st, EvFail) {
				msg := fmt.Sprintf("The request that moved node %s to state %q could not be confirmed (the database server went away during its write); no operation was started.", cur.UUID, st)
				e = c.fire(ctx, cur, EvFail, noTargetState, &msg)
			}
			if cur.TargetPowerState != nil {
				msg := fmt.Sprintf("Pending power operation to %q was aborted: the request could not be confirmed (the database server went away during its write).", *cur.TargetPowerState)
				cur.TargetPowerState = nil
				cur.LastError = &msg
				if e == nil {
					e = c.powerEvent(ctx, cur, "recovery", "ERROR", msg)
				}
			}
			return e, nil
		})
		if err != nil {
			if fault.Is(err, fault.NotFound) {
				c.holds.clear(uuid)
				continue
			}
			return err
		}
		if released {
			c.log.WarnContext(ctx, "released a reservation no task holds (its reserving write failed ambiguously)", "node", uuid)
		}
		if !retry {
			c.holds.clear(uuid)
		}
	}
	return nil
}
