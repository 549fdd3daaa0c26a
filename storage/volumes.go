package storage

import (
	"context"
	"database/sql/driver"
	"fmt"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

// VolumeConnector is a node's initiator for remote volumes (Ironic's volume
// connector, API 1.32): an iqn, ip, mac, wwnn, wwpn, ... identifier.
type VolumeConnector struct {
	ID          int64
	UUID        string
	NodeUUID    string
	Type        string
	ConnectorID string
	Extra       JSONObject
	CreatedAt   time.Time
	UpdatedAt   *time.Time
}

// VolumeTarget is a remote volume a node uses (Ironic's volume target, API
// 1.32); boot_index 0 is the boot volume.
type VolumeTarget struct {
	ID         int64
	UUID       string
	NodeUUID   string
	VolumeType string
	Properties JSONObject
	BootIndex  int64
	VolumeID   string
	Extra      JSONObject
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// VolumeQuery filters a volume connector or target list.
type VolumeQuery struct {
	Page
	NodeUUID *string
}

// VolumeStore keeps volume connectors and targets. Both belong to a node and
// go when it goes. Duplicates are fault.Conflict with Ironic's wording: a
// connector's (type, connector_id) and a target's (node, boot_index) are
// unique. An unknown node is NodeNotFound.
type VolumeStore interface {
	CreateVolumeConnector(ctx context.Context, c *VolumeConnector) error
	GetVolumeConnector(ctx context.Context, uuid string) (*VolumeConnector, error)
	ListVolumeConnectors(ctx context.Context, q VolumeQuery) ([]*VolumeConnector, error)
	// UpdateVolumeConnector reads the connector, applies fn and writes the
	// changed columns back atomically, setting UpdatedAt.
	UpdateVolumeConnector(ctx context.Context, uuid string, fn func(c *VolumeConnector) error) (*VolumeConnector, error)
	DeleteVolumeConnector(ctx context.Context, uuid string) error

	CreateVolumeTarget(ctx context.Context, t *VolumeTarget) error
	GetVolumeTarget(ctx context.Context, uuid string) (*VolumeTarget, error)
	ListVolumeTargets(ctx context.Context, q VolumeQuery) ([]*VolumeTarget, error)
	UpdateVolumeTarget(ctx context.Context, uuid string, fn func(t *VolumeTarget) error) (*VolumeTarget, error)
	DeleteVolumeTarget(ctx context.Context, uuid string) error
}

// VolumeConnectorNotFound is Ironic's VolumeConnectorNotFound.
func VolumeConnectorNotFound(ident string) error {
	return fault.New(fault.NotFound, "Volume connector %s could not be found.", ident)
}

// VolumeTargetNotFound is Ironic's VolumeTargetNotFound.
func VolumeTargetNotFound(ident string) error {
	return fault.New(fault.NotFound, "Volume target %s could not be found.", ident)
}

// volumeInt is a NOT NULL INTEGER column (boot_index).
type volumeInt struct{ p *int64 }

func (c volumeInt) Value() (driver.Value, error) { return *c.p, nil }

func (c volumeInt) Scan(src any) error {
	switch v := src.(type) {
	case int64:
		*c.p = v
	case float64:
		*c.p = int64(v)
	default:
		return fmt.Errorf("storage: cannot read %T as an integer", src)
	}
	return nil
}

func volumeIntCol[T any](name string, f func(*T) *int64) column[T] {
	return column[T]{name: name, ref: func(v *T) codec { return volumeInt{f(v)} }}
}

type volumeSQL[T any] struct {
	table[T]
	byUUID string
}

var (
	connectorTable = volumeSQL[VolumeConnector]{table: newTable("volume_connectors", "id",
		func(c *VolumeConnector) *int64 { return &c.ID }, []column[VolumeConnector]{
			fixed(strCol("uuid", func(c *VolumeConnector) *string { return &c.UUID })),
			strCol("node_uuid", func(c *VolumeConnector) *string { return &c.NodeUUID }),
			strCol("type", func(c *VolumeConnector) *string { return &c.Type }),
			strCol("connector_id", func(c *VolumeConnector) *string { return &c.ConnectorID }),
			objectCol("extra", func(c *VolumeConnector) *JSONObject { return &c.Extra }),
			fixed(timeCol("created_at", func(c *VolumeConnector) *time.Time { return &c.CreatedAt })),
			nullTimeCol("updated_at", func(c *VolumeConnector) **time.Time { return &c.UpdatedAt }),
		})}
	targetTable = volumeSQL[VolumeTarget]{table: newTable("volume_targets", "id",
		func(t *VolumeTarget) *int64 { return &t.ID }, []column[VolumeTarget]{
			fixed(strCol("uuid", func(t *VolumeTarget) *string { return &t.UUID })),
			strCol("node_uuid", func(t *VolumeTarget) *string { return &t.NodeUUID }),
			strCol("volume_type", func(t *VolumeTarget) *string { return &t.VolumeType }),
			objectCol("properties", func(t *VolumeTarget) *JSONObject { return &t.Properties }),
			volumeIntCol("boot_index", func(t *VolumeTarget) *int64 { return &t.BootIndex }),
			strCol("volume_id", func(t *VolumeTarget) *string { return &t.VolumeID }),
			objectCol("extra", func(t *VolumeTarget) *JSONObject { return &t.Extra }),
			fixed(timeCol("created_at", func(t *VolumeTarget) *time.Time { return &t.CreatedAt })),
			nullTimeCol("updated_at", func(t *VolumeTarget) **time.Time { return &t.UpdatedAt }),
		})}
)

func init() {
	connectorTable.byUUID = connectorTable.selectFrom() + " WHERE uuid = ?"
	targetTable.byUUID = targetTable.selectFrom() + " WHERE uuid = ?"
}

// newVolumeUUID fills an empty uuid or canonicalizes the given one.
func newVolumeUUID(u *string) error {
	if *u == "" {
		*u = uuid.NewString()
		return nil
	}
	c, ok := canonicalUUID(*u)
	if !ok {
		return fault.New(fault.Invalid, "Expected a UUID but received %s.", *u)
	}
	*u = c
	return nil
}

func normalizeConnector(c *VolumeConnector) {
	c.NodeUUID = uuidKey(c.NodeUUID)
	c.CreatedAt = normTime(c.CreatedAt)
	c.UpdatedAt = normTimePtr(c.UpdatedAt)
	if c.Extra == nil {
		c.Extra = JSONObject{}
	}
}

func normalizeTarget(t *VolumeTarget) {
	t.NodeUUID = uuidKey(t.NodeUUID)
	t.CreatedAt = normTime(t.CreatedAt)
	t.UpdatedAt = normTimePtr(t.UpdatedAt)
	for _, m := range []*JSONObject{&t.Properties, &t.Extra} {
		if *m == nil {
			*m = JSONObject{}
		}
	}
}

func connectorWriteError(err error, c *VolumeConnector) error {
	if v, ok := violationOf(err); ok {
		switch {
		case v.foreign:
			return fault.NodeNotFound(c.NodeUUID)
		case v.unique == "volume_connectors.uuid":
			return fault.New(fault.Conflict, "A volume connector with UUID %s already exists.", c.UUID)
		case v.unique == "volume_connectors.type", v.unique == "volume_connectors.connector_id":
			return fault.New(fault.Conflict, "A volume connector with type %s and connector ID %s already exists.", c.Type, c.ConnectorID)
		}
	}
	return fmt.Errorf("storage: write volume connector %s: %w", c.UUID, err)
}

func targetWriteError(err error, t *VolumeTarget) error {
	if v, ok := violationOf(err); ok {
		switch {
		case v.foreign:
			return fault.NodeNotFound(t.NodeUUID)
		case v.unique == "volume_targets.uuid":
			return fault.New(fault.Conflict, "A volume target with UUID %s already exists.", t.UUID)
		case v.unique == "volume_targets.node_uuid", v.unique == "volume_targets.boot_index":
			return fault.New(fault.Conflict, "A volume target with boot index '%d' for the same node already exists.", t.BootIndex)
		}
	}
	return fmt.Errorf("storage: write volume target %s: %w", t.UUID, err)
}

// CreateVolumeConnector inserts c and fills c.ID (and UUID and CreatedAt
// when empty).
func (s *SQLite) CreateVolumeConnector(ctx context.Context, c *VolumeConnector) error {
	if err := newVolumeUUID(&c.UUID); err != nil {
		return err
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = time.Now()
	}
	normalizeConnector(c)
	return s.writeTx(ctx, func(r runner) error {
		if err := r.queryRow(ctx, connectorTable.insert, connectorTable.insertArgs(c)...).Scan(&c.ID); err != nil {
			return connectorWriteError(err, c)
		}
		return nil
	})
}

// GetVolumeConnector finds a connector by UUID.
func (s *SQLite) GetVolumeConnector(ctx context.Context, connUUID string) (*VolumeConnector, error) {
	return connectorTable.getOne(ctx, s.reader(), VolumeConnectorNotFound(connUUID), connectorTable.byUUID, uuidKey(connUUID))
}

// ListVolumeConnectors returns the connectors matching q, one page of them
// when q.Limit is set, in Ironic's order (creation by default).
func (s *SQLite) ListVolumeConnectors(ctx context.Context, q VolumeQuery) ([]*VolumeConnector, error) {
	f := &filter{}
	if q.NodeUUID != nil {
		f.add("node_uuid = ?", uuidKey(*q.NodeUUID))
	}
	return connectorTable.paged(ctx, s.reader(), f, q.Page, pageSpec{
		defaultSort:    "id",
		markerCol:      "uuid",
		markerNotFound: VolumeConnectorNotFound,
	})
}

// UpdateVolumeConnector reads the connector, applies fn and writes it back
// in one write transaction. An error from fn is returned unchanged.
func (s *SQLite) UpdateVolumeConnector(ctx context.Context, connUUID string, fn func(c *VolumeConnector) error) (*VolumeConnector, error) {
	var out *VolumeConnector
	err := s.writeTx(ctx, func(r runner) error {
		c, err := connectorTable.getOne(ctx, r, VolumeConnectorNotFound(connUUID), connectorTable.byUUID, uuidKey(connUUID))
		if err != nil {
			return err
		}
		id, cu, created := c.ID, c.UUID, c.CreatedAt
		before, err := connectorTable.values(c)
		if err != nil {
			return err
		}
		if err := fn(c); err != nil {
			return err
		}
		if c.ID != id || c.UUID != cu {
			return fmt.Errorf("storage: update volume connector %s: id and uuid cannot change", cu)
		}
		c.CreatedAt = created
		now := time.Now()
		c.UpdatedAt = &now
		normalizeConnector(c)
		after, err := connectorTable.values(c)
		if err != nil {
			return err
		}
		if err := connectorTable.updateChanged(ctx, r, before, after, c.ID); err != nil {
			return connectorWriteError(err, c)
		}
		out = c
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteVolumeConnector removes a connector.
func (s *SQLite) DeleteVolumeConnector(ctx context.Context, connUUID string) error {
	return s.writeTx(ctx, func(r runner) error {
		err := execOne(ctx, r, VolumeConnectorNotFound(connUUID), "DELETE FROM volume_connectors WHERE uuid = ?", uuidKey(connUUID))
		if err != nil && !fault.Is(err, fault.NotFound) {
			return fmt.Errorf("storage: delete volume connector %s: %w", connUUID, err)
		}
		return err
	})
}

// CreateVolumeTarget inserts t and fills t.ID (and UUID and CreatedAt when
// empty).
func (s *SQLite) CreateVolumeTarget(ctx context.Context, t *VolumeTarget) error {
	if err := newVolumeUUID(&t.UUID); err != nil {
		return err
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = time.Now()
	}
	normalizeTarget(t)
	return s.writeTx(ctx, func(r runner) error {
		if err := r.queryRow(ctx, targetTable.insert, targetTable.insertArgs(t)...).Scan(&t.ID); err != nil {
			return targetWriteError(err, t)
		}
		return nil
	})
}

// GetVolumeTarget finds a target by UUID.
func (s *SQLite) GetVolumeTarget(ctx context.Context, targetUUID string) (*VolumeTarget, error) {
	return targetTable.getOne(ctx, s.reader(), VolumeTargetNotFound(targetUUID), targetTable.byUUID, uuidKey(targetUUID))
}

// ListVolumeTargets returns the targets matching q, one page of them when
// q.Limit is set.
func (s *SQLite) ListVolumeTargets(ctx context.Context, q VolumeQuery) ([]*VolumeTarget, error) {
	f := &filter{}
	if q.NodeUUID != nil {
		f.add("node_uuid = ?", uuidKey(*q.NodeUUID))
	}
	return targetTable.paged(ctx, s.reader(), f, q.Page, pageSpec{
		defaultSort:    "id",
		markerCol:      "uuid",
		markerNotFound: VolumeTargetNotFound,
	})
}

// UpdateVolumeTarget reads the target, applies fn and writes it back in one
// write transaction. An error from fn is returned unchanged.
func (s *SQLite) UpdateVolumeTarget(ctx context.Context, targetUUID string, fn func(t *VolumeTarget) error) (*VolumeTarget, error) {
	var out *VolumeTarget
	err := s.writeTx(ctx, func(r runner) error {
		t, err := targetTable.getOne(ctx, r, VolumeTargetNotFound(targetUUID), targetTable.byUUID, uuidKey(targetUUID))
		if err != nil {
			return err
		}
		id, tu, created := t.ID, t.UUID, t.CreatedAt
		before, err := targetTable.values(t)
		if err != nil {
			return err
		}
		if err := fn(t); err != nil {
			return err
		}
		if t.ID != id || t.UUID != tu {
			return fmt.Errorf("storage: update volume target %s: id and uuid cannot change", tu)
		}
		t.CreatedAt = created
		now := time.Now()
		t.UpdatedAt = &now
		normalizeTarget(t)
		after, err := targetTable.values(t)
		if err != nil {
			return err
		}
		if err := targetTable.updateChanged(ctx, r, before, after, t.ID); err != nil {
			return targetWriteError(err, t)
		}
		out = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteVolumeTarget removes a target.
func (s *SQLite) DeleteVolumeTarget(ctx context.Context, targetUUID string) error {
	return s.writeTx(ctx, func(r runner) error {
		err := execOne(ctx, r, VolumeTargetNotFound(targetUUID), "DELETE FROM volume_targets WHERE uuid = ?", uuidKey(targetUUID))
		if err != nil && !fault.Is(err, fault.NotFound) {
			return fmt.Errorf("storage: delete volume target %s: %w", targetUUID, err)
		}
		return err
	})
}
