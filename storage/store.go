// Package storage keeps castiron's durable state. The Store interface is shaped
// by what engine and httpapi need; SQLite (modernc.org/sqlite) is the embedded
// implementation. No HTTP here, and no state-machine rules.
package storage

import (
	"context"
	"time"
)

// NodeUpdate mutates a node inside a write transaction. It may return an
// event to record in the node's history in the same transaction. Returning an
// error rolls everything back and is passed through to the caller unchanged.
type NodeUpdate func(n *Node) (*Event, error)

// Store is castiron's persistence. Errors are neutral and fault-classified
// (errors.go): NotFoundError for unknown idents, DuplicateError for unique
// constraints, InUseError, InvalidError; engine.Word words them as Ironic does.
type Store interface {
	// CreateNode inserts n (UUID, CreatedAt set by the caller) and fills n.ID.
	CreateNode(ctx context.Context, n *Node) error
	// GetNode finds a node by UUID, or by name when ident is not a UUID.
	GetNode(ctx context.Context, ident string) (*Node, error)
	// NodeCount is the number of nodes, of every conductor group.
	NodeCount(ctx context.Context) (int, error)
	// GetNodeVersion finds a node as GetNode does, reading only its row
	// version and what places it on the hash ring.
	GetNodeVersion(ctx context.Context, ident string) (*NodeVersion, error)
	// GetNodeByInstance finds a node by instance_uuid.
	GetNodeByInstance(ctx context.Context, instanceUUID string) (*Node, error)
	ListNodes(ctx context.Context, q NodeQuery) ([]*Node, error)
	// ListNodeVersions is ListNodes reading what GetNodeVersion reads (of
	// it only q.Columns when they are set).
	ListNodeVersions(ctx context.Context, q NodeQuery) ([]*NodeVersion, error)
	// UpdateNode reads the node, applies fn and writes it back atomically,
	// setting UpdatedAt. It returns the node as written.
	UpdateNode(ctx context.Context, ident string, fn NodeUpdate) (*Node, error)
	// DeleteNode removes a node with its ports and history.
	DeleteNode(ctx context.Context, uuid string) error
	// ReleaseAllReservations clears every reservation held by host (restart
	// recovery) and returns the UUIDs that were reserved.
	ReleaseAllReservations(ctx context.Context, host string) ([]string, error)

	CreatePort(ctx context.Context, p *Port) error
	GetPort(ctx context.Context, uuid string) (*Port, error)
	GetPortByAddress(ctx context.Context, address string) (*Port, error)
	ListPorts(ctx context.Context, q PortQuery) ([]*Port, error)
	UpdatePort(ctx context.Context, uuid string, fn func(p *Port) error) (*Port, error)
	DeletePort(ctx context.Context, uuid string) error

	// RegisterConductor inserts or replaces a conductor row and marks it online.
	RegisterConductor(ctx context.Context, c *Conductor) error
	// TouchConductor records a heartbeat at t.
	TouchConductor(ctx context.Context, hostname string, t time.Time) error
	// UnregisterConductor marks it offline (clean shutdown).
	UnregisterConductor(ctx context.Context, hostname string) error
	GetConductor(ctx context.Context, hostname string) (*Conductor, error)
	ListConductors(ctx context.Context, page Page) ([]*Conductor, error)

	AddEvent(ctx context.Context, e *Event) error
	ListEvents(ctx context.Context, nodeUUID string, page Page) ([]*Event, error)
	GetEvent(ctx context.Context, nodeUUID, eventUUID string) (*Event, error)

	AllocationStore

	Close() error

	ChassisStore
	PortgroupStore
	VolumeStore
	FirmwareStore
	DeployTemplateStore
	RunbookStore
	BIOSStore
	InspectionRuleStore
	IdentityStore
	PortLookupStore
	BootEventStore
	LeaseStore
}
