package storage

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
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
	// DeleteChassis removes a chassis no node names (else Ironic's
	// ChassisNotEmpty, a fault.Invalid).
	DeleteChassis(ctx context.Context, uuid string) error
}

// chassisSQL is the generated SQL of the chassis table.
type chassisSQL struct {
	table[Chassis]
	byUUID string
}

// chassisTable is built once: SQLite's fields are not this file's to extend.
var chassisTable = newChassisSQL()

func newChassisSQL() chassisSQL {
	t := newTable("chassis", "id", func(c *Chassis) *int64 { return &c.ID }, []column[Chassis]{
		fixed(strCol("uuid", func(c *Chassis) *string { return &c.UUID })),
		nullStrCol("description", func(c *Chassis) **string { return &c.Description }),
		objectCol("extra", func(c *Chassis) *JSONObject { return &c.Extra }),
		fixed(timeCol("created_at", func(c *Chassis) *time.Time { return &c.CreatedAt })),
		nullTimeCol("updated_at", func(c *Chassis) **time.Time { return &c.UpdatedAt }),
	})
	return chassisSQL{table: t, byUUID: t.selectFrom() + " WHERE uuid = ?"}
}

// ChassisNotFound is Ironic's ChassisNotFound message.
func ChassisNotFound(ident string) error {
	return fault.New(fault.NotFound, "Chassis %s could not be found.", ident)
}

func normalizeChassis(c *Chassis) {
	c.CreatedAt = normTime(c.CreatedAt)
	c.UpdatedAt = normTimePtr(c.UpdatedAt)
	if c.Extra == nil {
		c.Extra = JSONObject{}
	}
}

func chassisWriteError(err error, c *Chassis) error {
	if v, ok := violationOf(err); ok && v.unique == "chassis.uuid" {
		return fault.New(fault.Conflict, "A chassis with UUID %s already exists.", c.UUID)
	}
	return fmt.Errorf("storage: write chassis %s: %w", c.UUID, err)
}

// CreateChassis inserts c and fills c.ID.
func (s *SQLite) CreateChassis(ctx context.Context, c *Chassis) error {
	if c.UUID == "" {
		c.UUID = uuid.NewString()
	} else if u, ok := canonicalUUID(c.UUID); ok {
		c.UUID = u
	} else {
		return fault.New(fault.Invalid, "Expected a UUID but received %s.", c.UUID)
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now()
	}
	normalizeChassis(c)
	if err := s.writer().queryRow(ctx, chassisTable.insert, chassisTable.insertArgs(c)...).Scan(&c.ID); err != nil {
		return chassisWriteError(err, c)
	}
	return nil
}

// GetChassis finds a chassis by UUID (any spelling uuid.Parse accepts).
func (s *SQLite) GetChassis(ctx context.Context, chassisUUID string) (*Chassis, error) {
	return chassisTable.getOne(ctx, s.reader(), ChassisNotFound(chassisUUID), chassisTable.byUUID, uuidKey(chassisUUID))
}

// ListChassis returns one page of chassis in Ironic's sort and marker
// semantics.
func (s *SQLite) ListChassis(ctx context.Context, page Page) ([]*Chassis, error) {
	return chassisTable.paged(ctx, s.reader(), &filter{}, page, pageSpec{
		defaultSort:    "id",
		markerCol:      "uuid",
		markerNotFound: ChassisNotFound,
	})
}

// UpdateChassis reads the chassis, applies fn and writes the changed columns
// back in one write transaction.
func (s *SQLite) UpdateChassis(ctx context.Context, chassisUUID string, fn func(c *Chassis) error) (*Chassis, error) {
	var out *Chassis
	err := s.writeTx(ctx, func(r runner) error {
		c, err := chassisTable.getOne(ctx, r, ChassisNotFound(chassisUUID), chassisTable.byUUID, uuidKey(chassisUUID))
		if err != nil {
			return err
		}
		id, cu, created := c.ID, c.UUID, c.CreatedAt
		before, err := chassisTable.values(c)
		if err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
		if c.ID != id || c.UUID != cu {
			// Nodes reference the uuid.
			return fmt.Errorf("storage: update chassis %s: id and uuid cannot change", cu)
		}
		c.CreatedAt = created
		now := time.Now()
		c.UpdatedAt = &now
		normalizeChassis(c)
		after, err := chassisTable.values(c)
		if err != nil {
			return err
		}
		if err := chassisTable.updateChanged(ctx, r, before, after, c.ID); err != nil {
			return chassisWriteError(err, c)
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteChassis removes a chassis that no node names. The check and the
// delete share one write transaction, so a node cannot join in between.
func (s *SQLite) DeleteChassis(ctx context.Context, chassisUUID string) error {
	key := uuidKey(chassisUUID)
	return s.writeTx(ctx, func(r runner) error {
		var one int
		err := r.queryRow(ctx, "SELECT COUNT(*) FROM (SELECT 1 FROM nodes WHERE chassis_uuid = ? LIMIT 1) AS used", key).Scan(&one)
		if err != nil {
			return fmt.Errorf("storage: delete chassis %s: %w", chassisUUID, err)
		}
		if one > 0 {
			// Ironic's ChassisNotEmpty, an Invalid (400).
			return fault.New(fault.Invalid, "Cannot complete the requested action because chassis %s contains nodes.", chassisUUID)
		}
		err = execOne(ctx, r, ChassisNotFound(chassisUUID), "DELETE FROM chassis WHERE uuid = ?", key)
		if err != nil && !fault.Is(err, fault.NotFound) {
			return fmt.Errorf("storage: delete chassis %s: %w", chassisUUID, err)
		}
		return err
	})
}
