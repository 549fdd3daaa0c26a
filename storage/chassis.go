package storage

import (
	"context"
	"time"
)

// Chassis is Ironic's chassis: a named group of nodes with a description.
type Chassis struct {
	ID          int64
	UUID        string
	Description *string
	Extra       JSONObject
	CreatedAt   time.Time
	UpdatedAt   *time.Time
}

// ChassisStore keeps chassis. Nodes name their chassis by nodes.chassis_uuid.
type ChassisStore interface {
	// CreateChassis inserts c and fills c.ID (and UUID and CreatedAt when
	// empty). A duplicate UUID is Ironic's ChassisAlreadyExists.
	CreateChassis(ctx context.Context, c *Chassis) error
	// GetChassis finds a chassis by UUID.
	GetChassis(ctx context.Context, uuid string) (*Chassis, error)
	ListChassis(ctx context.Context, page Page) ([]*Chassis, error)
	// UpdateChassis reads the chassis, applies fn and writes it back
	// atomically, setting UpdatedAt. An error from fn is returned unchanged.
	UpdateChassis(ctx context.Context, uuid string, fn func(c *Chassis) error) (*Chassis, error)
	// DeleteChassis removes a chassis no node names (else an InUseError).
	DeleteChassis(ctx context.Context, uuid string) error
}

// chassisTable is built once: SQLite's fields are not this file's to extend.
var chassisTable = resourceTable("chassis", func(c *Chassis) (*int64, *string, *time.Time, **time.Time) {
	return &c.ID, &c.UUID, &c.CreatedAt, &c.UpdatedAt
}, []column[Chassis]{
	nullStrCol("description", func(c *Chassis) **string { return &c.Description }),
	objectCol("extra", func(c *Chassis) *JSONObject { return &c.Extra }),
}, record[Chassis]{
	normalize: normalizeChassis,
})

func normalizeChassis(c *Chassis) {
	orEmpty(&c.Extra)
}

// CreateChassis inserts c and fills c.ID.
func (s *DB) CreateChassis(ctx context.Context, c *Chassis) error {
	return s.write(ctx, func(r runner) error { return chassisTable.create(ctx, r, c) })
}

// GetChassis finds a chassis by UUID (any spelling uuid.Parse accepts).
func (s *DB) GetChassis(ctx context.Context, chassisUUID string) (*Chassis, error) {
	return chassisTable.get(ctx, s.reader(), chassisUUID)
}

// ListChassis returns one page of chassis in Ironic's sort and marker
// semantics.
func (s *DB) ListChassis(ctx context.Context, page Page) ([]*Chassis, error) {
	return chassisTable.list(ctx, s.reader(), &filter{}, page)
}

// UpdateChassis reads the chassis, applies fn and writes the changed columns
// back in one write transaction.
func (s *DB) UpdateChassis(ctx context.Context, chassisUUID string, fn func(c *Chassis) error) (*Chassis, error) {
	return chassisTable.update(ctx, s, chassisUUID, fn)
}

// DeleteChassis removes a chassis that no node names. The check and the
// delete share one write transaction, so a node cannot join in between.
func (s *DB) DeleteChassis(ctx context.Context, chassisUUID string) error {
	key := uuidKey(chassisUUID)
	return s.writeTx(ctx, func(r runner) error {
		if err := refuseInUse(ctx, r, "nodes", "chassis_uuid", key, &InUseError{Table: "chassis", Key: chassisUUID, By: "nodes"}); err != nil {
			return err
		}
		return chassisTable.remove(ctx, r, chassisUUID)
	})
}
