package storage

import (
	"context"
	"fmt"
	"time"
)

// Allocation is a request for a node (Ironic's allocation, API 1.52+).
// State is "allocating", "active" or "error"; the engine moves it.
type Allocation struct {
	ID             int64
	UUID           string
	Name           *string
	NodeUUID       *string // the node it holds, once active
	State          string
	Owner          *string
	LastError      *string
	ResourceClass  *string
	Traits         []string
	CandidateNodes []string // node UUIDs
	Extra          JSONObject
	// ConductorAffinity is the hostname of the conductor processing it.
	ConductorAffinity *string
	CreatedAt         time.Time
	UpdatedAt         *time.Time
}

// AllocationQuery filters an allocation list. Nil pointers mean "no filter".
type AllocationQuery struct {
	Page
	NodeUUID          *string
	ResourceClass     *string
	State             *string
	Owner             *string
	ConductorAffinity *string
}

// AllocationStore keeps allocations. Every write that touches a node too
// (binding, freeing) happens in one transaction with it.
type AllocationStore interface {
	// CreateAllocation inserts a and fills a.ID (and UUID and CreatedAt
	// when empty). Duplicate UUID or name give Ironic's Conflicts.
	CreateAllocation(ctx context.Context, a *Allocation) error
	// GetAllocation finds an allocation by UUID, or by name when ident is
	// not a UUID.
	GetAllocation(ctx context.Context, ident string) (*Allocation, error)
	ListAllocations(ctx context.Context, q AllocationQuery) ([]*Allocation, error)
	// UpdateAllocation reads the allocation, applies fn and writes it back
	// atomically, setting UpdatedAt. An error from fn is returned unchanged.
	UpdateAllocation(ctx context.Context, ident string, fn func(a *Allocation) error) (*Allocation, error)
	// UpdateAllocationAndNode reads an allocation and a node and lets fn
	// change both in one write transaction (binding a node). The node's
	// instance_uuid is unique: taking one another node holds is a Conflict
	// with Ironic's InstanceAssociated message.
	UpdateAllocationAndNode(ctx context.Context, ident, nodeIdent string,
		fn func(a *Allocation, n *Node) error) (*Allocation, *Node, error)
	// DeleteAllocation removes an allocation in one write transaction:
	// check runs first with the allocation and its node (nil when it holds
	// none) and may refuse; then the node's allocation_uuid and
	// instance_uuid are cleared and the allocation deleted.
	DeleteAllocation(ctx context.Context, ident string, check func(a *Allocation, n *Node) error) error

	ShardStore
}

// allocs is built once: the table's SQL does not depend on the store.
var allocs = resourceTable("allocations", func(a *Allocation) (*int64, *string, *time.Time, **time.Time) {
	return &a.ID, &a.UUID, &a.CreatedAt, &a.UpdatedAt
}, []column[Allocation]{
	nullStrCol("name", func(a *Allocation) **string { return &a.Name }),
	nullStrCol("node_uuid", func(a *Allocation) **string { return &a.NodeUUID }),
	strCol("state", func(a *Allocation) *string { return &a.State }),
	nullStrCol("owner", func(a *Allocation) **string { return &a.Owner }),
	nullStrCol("last_error", func(a *Allocation) **string { return &a.LastError }),
	nullStrCol("resource_class", func(a *Allocation) **string { return &a.ResourceClass }),
	listCol("traits", func(a *Allocation) *[]string { return &a.Traits }),
	listCol("candidate_nodes", func(a *Allocation) *[]string { return &a.CandidateNodes }),
	objectCol("extra", func(a *Allocation) *JSONObject { return &a.Extra }),
	nullStrCol("conductor_affinity", func(a *Allocation) **string { return &a.ConductorAffinity }),
}, record[Allocation]{
	normalize: normalizeAllocation,
	unique: map[string]func(*Allocation) []string{
		"name": one(func(a *Allocation) string { return deref(a.Name) }),
	},
	parent: func(a *Allocation) string { return deref(a.NodeUUID) },
	named:  true,
})

// normalizeAllocation gives a its stored shape.
func normalizeAllocation(a *Allocation) {
	if a.NodeUUID != nil {
		u := uuidKey(*a.NodeUUID)
		a.NodeUUID = &u
	}
	orEmpty(&a.Extra)
	if a.Traits == nil {
		a.Traits = []string{}
	}
	if a.CandidateNodes == nil {
		a.CandidateNodes = []string{}
	}
}

// getAllocation looks ident up as a UUID when it is one, else as a name.
func (s *DB) getAllocation(ctx context.Context, r runner, ident string) (*Allocation, error) {
	return allocs.get(ctx, r, ident)
}

// CreateAllocation inserts a and fills a.ID.
func (s *DB) CreateAllocation(ctx context.Context, a *Allocation) error {
	return s.write(ctx, func(r runner) error { return allocs.create(ctx, r, a) })
}

// GetAllocation finds an allocation by UUID or name.
func (s *DB) GetAllocation(ctx context.Context, ident string) (*Allocation, error) {
	return s.getAllocation(ctx, s.reader(), ident)
}

// ListAllocations returns the allocations matching q, one page of them when
// q.Limit is set.
func (s *DB) ListAllocations(ctx context.Context, q AllocationQuery) ([]*Allocation, error) {
	f := &filter{}
	f.eq("node_uuid", q.NodeUUID, uuidKey)
	f.eq("resource_class", q.ResourceClass, nil)
	f.eq("state", q.State, nil)
	f.eq("owner", q.Owner, nil)
	f.eq("conductor_affinity", q.ConductorAffinity, nil)
	return allocs.list(ctx, s.reader(), f, q.Page)
}

// UpdateAllocation applies fn to an allocation in one write transaction.
func (s *DB) UpdateAllocation(ctx context.Context, ident string, fn func(a *Allocation) error) (*Allocation, error) {
	return allocs.update(ctx, s, ident, fn)
}

// UpdateAllocationAndNode applies fn to an allocation and a node in one
// write transaction.
func (s *DB) UpdateAllocationAndNode(ctx context.Context, ident, nodeIdent string,
	fn func(a *Allocation, n *Node) error) (*Allocation, *Node, error) {
	var outA *Allocation
	var outN *Node
	err := s.writeTx(ctx, func(r runner) error {
		a, err := s.getAllocation(ctx, r, ident)
		if err != nil {
			return err
		}
		n, err := s.getNode(ctx, r, nodeIdent)
		if err != nil {
			return err
		}
		// fn runs inside the allocation's rewrite, which runs inside the
		// node's: each writes the columns fn changed in its row.
		return s.nodes.rewrite(ctx, r, n, func(n *Node) error {
			if err := allocs.rewrite(ctx, r, a, func(a *Allocation) error { return fn(a, n) }); err != nil {
				return err
			}
			outA, outN = a, n
			return nil
		})
	})
	if err != nil {
		return nil, nil, err
	}
	return outA, outN, nil
}

// DeleteAllocation frees the allocation's node and deletes it, as Ironic's
// destroy_allocation does, after check has accepted both.
func (s *DB) DeleteAllocation(ctx context.Context, ident string, check func(a *Allocation, n *Node) error) error {
	return s.writeTx(ctx, func(r runner) error {
		a, err := s.getAllocation(ctx, r, ident)
		if err != nil {
			return err
		}
		var n *Node
		if a.NodeUUID != nil {
			// A node deleted meanwhile took the allocation with it
			// (ON DELETE CASCADE), so the node is there.
			if n, err = s.getNode(ctx, r, *a.NodeUUID); err != nil {
				return err
			}
		}
		if check != nil {
			if err := check(a, n); err != nil {
				return err
			}
		}
		if _, err := r.exec(ctx, "DELETE FROM allocations WHERE id = ?", a.ID); err != nil {
			return fmt.Errorf("storage: delete allocation %s: %w", a.UUID, err)
		}
		if _, err := r.exec(ctx,
			"UPDATE nodes SET allocation_uuid = NULL, instance_uuid = NULL, updated_at = ?, row_version = row_version + 1 WHERE allocation_uuid = ?",
			formatTime(time.Now()), a.UUID); err != nil {
			return fmt.Errorf("storage: free the node of allocation %s: %w", a.UUID, err)
		}
		return nil
	})
}
