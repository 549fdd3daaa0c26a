package engine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"castiron/fault"
	"castiron/fault/pyrepr"
	"castiron/storage"
)

// Allocation states, as Ironic names them.
const (
	AllocationAllocating = "allocating"
	AllocationActive     = "active"
	AllocationError      = "error"
)

// Ironic's [conductor]node_locked_retry_attempts and _interval: how often,
// and how far apart, an allocation retries the suitable nodes it found
// locked by other work.
const (
	allocationAttempts      = 3
	allocationRetryInterval = time.Second
)

// allocationUpdateStates are Ironic's UPDATE_ALLOWED_STATES: the transient
// states in which a node's allocation may still be removed.
var allocationUpdateStates = []State{
	DeployFail, Inspecting, InspectFail, InspectWait, CleanFail, Error,
	Verifying, AdoptFail, RescueFail, UnrescueFail, ServiceHold, ServiceFail,
}

// allocationFailure is Ironic's AllocationFailed: an allocation that cannot
// be fulfilled. Its reason is what goes into last_error.
type allocationFailure struct{ uuid, reason string }

func (e *allocationFailure) Error() string {
	return fmt.Sprintf("Failed to process allocation %s: %s.", e.uuid, e.reason)
}

func allocationFailed(uuid, format string, args ...any) error {
	return &allocationFailure{uuid: uuid, reason: fmt.Sprintf(format, args...)}
}

// errSkipNode and errAllocationSettled end a binding transaction without
// writing: the node no longer suits, or the allocation is no longer waiting.
var (
	errSkipNode          = errors.New("node no longer suitable")
	errAllocationSettled = errors.New("allocation no longer allocating")
)

// CreateAllocation stores a new allocation (the API has checked and
// completed it: resource class, candidate node UUIDs) and processes it as
// Ironic's conductor does. With backfillNode (API 1.58) the node, which must
// be active already, is bound synchronously and a failure is returned after
// the allocation is saved in state error. Otherwise the allocation is
// returned in state allocating and a worker owned by the conductor binds a
// random suitable node or records the failure.
func (c *Conductor) CreateAllocation(ctx context.Context, a *storage.Allocation, backfillNode string) error {
	a.State = AllocationAllocating
	a.NodeUUID, a.LastError = nil, nil
	host := c.cfg.Hostname
	a.ConductorAffinity = &host
	a.CreatedAt = c.now()
	a.UpdatedAt = nil
	if err := c.store.CreateAllocation(ctx, a); err != nil {
		return err
	}
	c.log.InfoContext(ctx, "allocation created", "allocation", a.UUID, "resource_class", deref(a.ResourceClass),
		"verb", "allocate", "backfill", backfillNode)
	if backfillNode != "" {
		return c.backfillAllocation(ctx, a, backfillNode)
	}
	c.startAllocation(ctx, a.UUID)
	return nil
}

// startAllocation hands an allocation to a background worker. Before Start
// there is no worker to own it; it stays allocating until ResumeAllocations.
func (c *Conductor) startAllocation(ctx context.Context, uuid string) {
	if c.runCtx == nil {
		return
	}
	c.spawn(ctx, func(ctx context.Context) { c.allocate(ctx, uuid) })
}

// ResumeAllocations restarts the allocations this conductor left in state
// allocating (Ironic's _resume_allocations, run at start-up).
func (c *Conductor) ResumeAllocations(ctx context.Context) error {
	state, host := AllocationAllocating, c.cfg.Hostname
	list, err := c.store.ListAllocations(ctx, storage.AllocationQuery{State: &state, ConductorAffinity: &host})
	if err != nil {
		return err
	}
	for _, a := range list {
		c.log.InfoContext(ctx, "resuming unfinished allocation", "allocation", a.UUID, "verb", "allocate")
		c.startAllocation(ctx, a.UUID)
	}
	return nil
}

// adoptAllocations moves the unfinished allocations of the dead conductor
// host to this one and resumes them. The move is one row-locked write per
// allocation, so when several conductors take over at once each allocation
// is adopted by one of them.
func (c *Conductor) adoptAllocations(ctx context.Context, host string) error {
	state := AllocationAllocating
	list, err := c.store.ListAllocations(ctx, storage.AllocationQuery{State: &state, ConductorAffinity: &host})
	if err != nil {
		return err
	}
	for _, a := range list {
		adopted := false
		_, err := c.store.UpdateAllocation(ctx, a.UUID, func(cur *storage.Allocation) error {
			adopted = cur.State == AllocationAllocating && cur.ConductorAffinity != nil && *cur.ConductorAffinity == host
			if !adopted {
				return errAllocationSettled
			}
			cur.ConductorAffinity = strp(c.cfg.Hostname)
			return nil
		})
		if err != nil && !errors.Is(err, errAllocationSettled) && !fault.Is(err, fault.NotFound) {
			return err
		}
		if adopted {
			c.log.InfoContext(ctx, "resuming the allocation of a dead conductor", "allocation", a.UUID, "dead", host, "verb", "allocate")
			c.startAllocation(ctx, a.UUID)
		}
	}
	return nil
}

// allocate is Ironic's do_allocate: it finds the candidate nodes and binds
// one of them, or records why it could not. It never returns an error: the
// outcome is the allocation's state.
func (c *Conductor) allocate(ctx context.Context, uuid string) {
	a, err := c.store.GetAllocation(ctx, uuid)
	if err != nil {
		if !fault.Is(err, fault.NotFound) && ctx.Err() == nil {
			c.log.WarnContext(ctx, "allocation cannot be read", "allocation", uuid, "err", err)
		}
		return
	}
	if a.State != AllocationAllocating {
		return
	}
	nodes, err := c.allocationCandidates(ctx, a)
	if err == nil {
		err = c.bindOneOf(ctx, a, nodes)
	}
	switch {
	case err == nil, errors.Is(err, errAllocationSettled):
		return
	case ctx.Err() != nil:
		// Stopping: the allocation stays allocating and resumes with the
		// next start.
		return
	}
	var af *allocationFailure
	reason := Word(err).Error()
	if errors.As(err, &af) {
		c.log.ErrorContext(ctx, reason, "allocation", uuid, "verb", "allocate")
	} else {
		c.log.ErrorContext(ctx, "unexpected error while allocating", "allocation", uuid, "verb", "allocate", "err", err)
		reason = "Unexpected exception during allocation: " + reason
	}
	c.markAllocationFailed(ctx, uuid, reason)
}

// markAllocationFailed is Ironic's _allocation_failed.
func (c *Conductor) markAllocationFailed(ctx context.Context, uuid, reason string) {
	_, err := c.store.UpdateAllocation(ctx, uuid, func(a *storage.Allocation) error {
		a.NodeUUID = nil
		a.State = AllocationError
		a.LastError = &reason
		return nil
	})
	switch {
	case fault.Is(err, fault.NotFound):
		c.log.DebugContext(ctx, "not saving a failed allocation: it was deleted", "allocation", uuid)
	case err != nil:
		c.log.ErrorContext(ctx, "could not save the failed allocation", "allocation", uuid, "err", err)
	}
}

// candidateColumns are the node fields choosing a node needs.
var candidateColumns = []string{
	"uuid", "name", "provision_state", "power_state", "maintenance", "instance_uuid",
	"resource_class", "owner", "lessee", "traits", "reservation",
}

// allocationCandidates is Ironic's _candidate_nodes: available nodes with a
// known power state, out of maintenance and without an instance, of the
// requested resource class, among the requested candidates, owned or leased
// by the allocation's owner, with every requested trait; shuffled so that
// parallel allocations try them in different orders, except that a node
// named like the allocation goes first.
func (c *Conductor) allocationCandidates(ctx context.Context, a *storage.Allocation) ([]*storage.Node, error) {
	available := string(Available)
	no := false
	nodes, err := c.store.ListNodes(ctx, storage.NodeQuery{
		ResourceClass:   a.ResourceClass,
		ProvisionState:  &available,
		Associated:      &no,
		Maintenance:     &no,
		IncludeChildren: true,
		Columns:         candidateColumns,
	})
	if err != nil {
		return nil, err
	}
	nodes = slices.DeleteFunc(nodes, func(n *storage.Node) bool {
		if n.PowerState == nil {
			return true
		}
		if len(a.CandidateNodes) > 0 && !slices.Contains(a.CandidateNodes, n.UUID) {
			return true
		}
		if a.Owner != nil && deref(n.Owner) != *a.Owner && deref(n.Lessee) != *a.Owner {
			return true
		}
		return false
	})
	if len(nodes) == 0 {
		if len(a.CandidateNodes) > 0 {
			return nil, allocationFailed(a.UUID, "none of the requested nodes are available and match the resource class %s", pyrepr.Str(optional(a.ResourceClass)))
		}
		return nil, allocationFailed(a.UUID, "no available nodes match the resource class %s", pyrepr.Str(optional(a.ResourceClass)))
	}
	if len(a.Traits) > 0 {
		nodes = slices.DeleteFunc(nodes, func(n *storage.Node) bool { return !hasTraits(n, a.Traits) })
		if len(nodes) == 0 {
			return nil, allocationFailed(a.UUID, "no suitable nodes have the requested traits %s", strings.Join(a.Traits, ", "))
		}
	}
	rand.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	if a.Name != nil {
		if i := slices.IndexFunc(nodes, func(n *storage.Node) bool { return n.Name != nil && *n.Name == *a.Name }); i > 0 {
			n := nodes[i]
			nodes = slices.Insert(slices.Delete(nodes, i, i+1), 0, n)
		}
	}
	c.log.DebugContext(ctx, "allocation candidates", "allocation", a.UUID, "count", len(nodes))
	return nodes, nil
}

func hasTraits(n *storage.Node, traits []string) bool {
	for _, t := range traits {
		if !slices.Contains(n.Traits, t) {
			return false
		}
	}
	return true
}

// stillSuitable is Ironic's _verify_node, on the node as read inside the
// binding transaction.
func stillSuitable(n *storage.Node, a *storage.Allocation) bool {
	return !n.Maintenance && n.InstanceUUID == nil && State(n.ProvisionState) == Available &&
		deref(n.ResourceClass) == deref(a.ResourceClass) && hasTraits(n, a.Traits)
}

// bindOneOf is Ironic's _allocate_node with its retries: it tries each node
// in turn and binds the first that still suits; nodes that were locked are
// tried again, up to allocationAttempts times in all.
func (c *Conductor) bindOneOf(ctx context.Context, a *storage.Allocation, nodes []*storage.Node) error {
	for attempt := 1; ; attempt++ {
		var locked []*storage.Node
		for _, n := range nodes {
			err := c.bind(ctx, a.UUID, n.UUID, func(al *storage.Allocation, n *storage.Node) error {
				if al.State != AllocationAllocating {
					return errAllocationSettled
				}
				if n.Reservation != nil {
					return fault.Locked(n.UUID, *n.Reservation)
				}
				if !stillSuitable(n, al) {
					return errSkipNode
				}
				return nil
			})
			switch {
			case err == nil:
				return nil
			case errors.Is(err, errSkipNode):
				c.log.DebugContext(ctx, "node no longer suitable, skipping", "allocation", a.UUID, "node", n.UUID)
			case fault.Is(err, fault.NodeLocked):
				c.log.DebugContext(ctx, "node is locked, moving to the next one", "allocation", a.UUID, "node", n.UUID)
				locked = append(locked, n)
			case fault.Is(err, fault.NotFound):
				if _, gone := c.store.GetAllocation(ctx, a.UUID); fault.Is(gone, fault.NotFound) {
					return errAllocationSettled // deleted meanwhile
				}
				// The node was deleted meanwhile: no longer suitable.
			default:
				return err
			}
		}
		nodes = locked
		var failure error
		if len(nodes) > 0 {
			failure = allocationFailed(a.UUID, "could not reserve any of %d suitable nodes", len(nodes))
		} else {
			failure = allocationFailed(a.UUID, "all nodes were filtered out during reservation")
		}
		// Ironic sleeps and retries an empty list too; nothing can change
		// its outcome, so castiron reports it at once.
		if attempt >= allocationAttempts || len(nodes) == 0 {
			return failure
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(allocationRetryInterval):
		}
	}
}

// bind binds node nodeUUID to allocation allocUUID in one transaction, after
// check has accepted both as read there: the allocation becomes active on
// the node, and the node's instance_uuid and allocation_uuid name the
// allocation, with its requested traits in instance_info (Ironic's
// update_allocation with update_node).
func (c *Conductor) bind(ctx context.Context, allocUUID, nodeUUID string, check func(a *storage.Allocation, n *storage.Node) error) error {
	a, n, err := c.store.UpdateAllocationAndNode(ctx, allocUUID, nodeUUID, func(a *storage.Allocation, n *storage.Node) error {
		if err := check(a, n); err != nil {
			return err
		}
		if n.InstanceUUID != nil && *n.InstanceUUID != a.UUID {
			return fault.New(fault.Conflict, "Node %s is associated with instance %s.", n.UUID, *n.InstanceUUID)
		}
		a.NodeUUID = &n.UUID
		a.State = AllocationActive
		info := maps.Clone(n.InstanceInfo)
		if info == nil {
			info = storage.JSONObject{}
		}
		info["traits"] = append([]string{}, a.Traits...)
		n.InstanceInfo = info
		n.AllocationUUID = &a.UUID
		n.InstanceUUID = &a.UUID
		return nil
	})
	if err != nil {
		return err
	}
	c.log.InfoContext(ctx, "node reserved for allocation", "allocation", a.UUID, "node", n.UUID, "state", n.ProvisionState, "verb", "allocate")
	return nil
}

// backfillAllocation is Ironic's backfill_allocation: it binds an allocation
// to a node that was deployed without one. On failure the allocation is
// saved in state error and the error returned: Ironic's AllocationFailed
// (which Ironic answers 500) as Invalid, the others as they are.
func (c *Conductor) backfillAllocation(ctx context.Context, a *storage.Allocation, nodeUUID string) error {
	err := c.bind(ctx, a.UUID, nodeUUID, func(al *storage.Allocation, n *storage.Node) error {
		if n.Reservation != nil {
			return fault.Locked(n.UUID, *n.Reservation)
		}
		var errs []string
		if State(n.ProvisionState) != Active {
			errs = append(errs, fmt.Sprintf("Node must be in the \"active\" state, but the current state is \"%s\"", n.ProvisionState))
		}
		if al.ResourceClass != nil && deref(n.ResourceClass) != *al.ResourceClass {
			errs = append(errs, fmt.Sprintf("Resource class %s does not match the requested resource class %s",
				pyrepr.Str(optional(n.ResourceClass)), *al.ResourceClass))
		}
		if len(al.Traits) > 0 && !hasTraits(n, al.Traits) {
			errs = append(errs, fmt.Sprintf("List of traits %s does not match the requested traits %s",
				pyrepr.Repr(n.Traits), pyrepr.Repr(al.Traits)))
		}
		if len(al.CandidateNodes) > 0 && !slices.Contains(al.CandidateNodes, n.UUID) {
			errs = append(errs, fmt.Sprintf("Candidate nodes must be empty or contain the target node, but got %s",
				pyrepr.Repr(al.CandidateNodes)))
		}
		if len(errs) > 0 {
			return allocationFailed(al.UUID, "Cannot backfill an allocation for node %s: %s", n.UUID, strings.Join(errs, "; "))
		}
		return nil
	})
	if err == nil {
		got, err := c.store.GetAllocation(ctx, a.UUID)
		if err != nil {
			return err
		}
		*a = *got
		return nil
	}
	var af *allocationFailure
	reason := Word(err).Error()
	switch {
	case errors.As(err, &af):
		err = fault.New(fault.Invalid, "%s", reason)
	case fault.Is(err, fault.Conflict), fault.Is(err, fault.NotFound):
		// NodeAssociated, InstanceAssociated, NodeNotFound: as they are.
	default:
		reason = "Unexpected exception during allocation: " + reason
	}
	c.log.ErrorContext(ctx, "allocation backfill failed", "allocation", a.UUID, "node", nodeUUID, "verb", "allocate", "err", reason)
	c.markAllocationFailed(ctx, a.UUID, reason)
	return err
}

// UpdateAllocation applies an operator's change (name, extra) to an
// allocation.
func (c *Conductor) UpdateAllocation(ctx context.Context, ident string, change func(a *storage.Allocation) error) (*storage.Allocation, error) {
	a, err := c.store.UpdateAllocation(ctx, ident, change)
	if err != nil {
		return nil, err
	}
	c.log.InfoContext(ctx, "allocation updated", "allocation", a.UUID, "verb", "allocation-update")
	return a, nil
}

// DeleteAllocation removes an allocation and frees its node (instance_uuid
// and allocation_uuid cleared), refused as Ironic's
// verify_node_for_deallocation refuses it: a locked node, an active node or
// one in a transient state that allows no update, unless in maintenance.
func (c *Conductor) DeleteAllocation(ctx context.Context, ident string) error {
	var deleted, freed string
	err := c.store.DeleteAllocation(ctx, ident, func(a *storage.Allocation, n *storage.Node) error {
		deleted = a.UUID
		if n == nil {
			return nil
		}
		if n.Reservation != nil {
			return fault.Locked(n.UUID, *n.Reservation)
		}
		freed = n.UUID
		if n.Maintenance {
			return nil
		}
		st := State(n.ProvisionState)
		if n.TargetProvisionState != nil && !slices.Contains(allocationUpdateStates, st) {
			return fault.New(fault.Conflict, "Cannot remove allocation %s for node %s, because the node is in state %s where updates are not allowed (and maintenance mode is off)",
				a.UUID, n.UUID, n.ProvisionState)
		}
		if st == Active {
			return fault.New(fault.Conflict, "Cannot remove allocation %s for node %s, because the node is active (and maintenance mode is off)",
				a.UUID, n.UUID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	c.log.InfoContext(ctx, "allocation deleted", "allocation", deleted, "node", freed, "verb", "deallocate")
	return nil
}

// optional is an optional string as a decoded JSON value (nil for None).
func optional(s *string) any {
	if s == nil {
		return nil
	}
	return *s
}
