package storage

import (
	"context"
	"strconv"
	"time"
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
	// Project, when set, keeps the resources of nodes it owns or leases.
	Project *string
}

// VolumeStore keeps volume connectors and targets. Both belong to a node and
// go when it goes. Duplicates are DuplicateErrors: a
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

var (
	connectorTable = resourceTable("volume_connectors", func(c *VolumeConnector) (*int64, *string, *time.Time, **time.Time) {
		return &c.ID, &c.UUID, &c.CreatedAt, &c.UpdatedAt
	}, []column[VolumeConnector]{
		strCol("node_uuid", func(c *VolumeConnector) *string { return &c.NodeUUID }),
		strCol("type", func(c *VolumeConnector) *string { return &c.Type }),
		strCol("connector_id", func(c *VolumeConnector) *string { return &c.ConnectorID }),
		objectCol("extra", func(c *VolumeConnector) *JSONObject { return &c.Extra }),
	}, record[VolumeConnector]{
		normalize: normalizeConnector,
		unique: map[string]func(*VolumeConnector) []string{
			"type, connector_id": func(c *VolumeConnector) []string { return []string{c.Type, c.ConnectorID} },
		},
		parent: func(c *VolumeConnector) string { return c.NodeUUID },
	})
	targetTable = resourceTable("volume_targets", func(t *VolumeTarget) (*int64, *string, *time.Time, **time.Time) {
		return &t.ID, &t.UUID, &t.CreatedAt, &t.UpdatedAt
	}, []column[VolumeTarget]{
		strCol("node_uuid", func(t *VolumeTarget) *string { return &t.NodeUUID }),
		strCol("volume_type", func(t *VolumeTarget) *string { return &t.VolumeType }),
		objectCol("properties", func(t *VolumeTarget) *JSONObject { return &t.Properties }),
		intCol("boot_index", func(t *VolumeTarget) *int64 { return &t.BootIndex }),
		strCol("volume_id", func(t *VolumeTarget) *string { return &t.VolumeID }),
		objectCol("extra", func(t *VolumeTarget) *JSONObject { return &t.Extra }),
	}, record[VolumeTarget]{
		normalize: normalizeTarget,
		unique: map[string]func(*VolumeTarget) []string{
			"node_uuid, boot_index": func(t *VolumeTarget) []string {
				return []string{t.NodeUUID, strconv.FormatInt(t.BootIndex, 10)}
			},
		},
		parent: func(t *VolumeTarget) string { return t.NodeUUID },
	})
)

func normalizeConnector(c *VolumeConnector) {
	c.NodeUUID = uuidKey(c.NodeUUID)
	orEmpty(&c.Extra)
}

func normalizeTarget(t *VolumeTarget) {
	t.NodeUUID = uuidKey(t.NodeUUID)
	orEmpty(&t.Properties, &t.Extra)
}

// CreateVolumeConnector inserts c and fills c.ID (and UUID and CreatedAt
// when empty).
func (s *DB) CreateVolumeConnector(ctx context.Context, c *VolumeConnector) error {
	return s.write(ctx, func(r runner) error { return connectorTable.create(ctx, r, c) })
}

// GetVolumeConnector finds a connector by UUID.
func (s *DB) GetVolumeConnector(ctx context.Context, connUUID string) (*VolumeConnector, error) {
	return connectorTable.get(ctx, s.reader(), connUUID)
}

// ListVolumeConnectors returns the connectors matching q, one page of them
// when q.Limit is set, in Ironic's order (creation by default).
func (s *DB) ListVolumeConnectors(ctx context.Context, q VolumeQuery) ([]*VolumeConnector, error) {
	return connectorTable.list(ctx, s.reader(), q.filter(), q.Page)
}

// UpdateVolumeConnector reads the connector, applies fn and writes it back
// in one write transaction. An error from fn is returned unchanged.
func (s *DB) UpdateVolumeConnector(ctx context.Context, connUUID string, fn func(c *VolumeConnector) error) (*VolumeConnector, error) {
	return connectorTable.update(ctx, s, connUUID, fn)
}

// DeleteVolumeConnector removes a connector.
func (s *DB) DeleteVolumeConnector(ctx context.Context, connUUID string) error {
	return s.write(ctx, func(r runner) error { return connectorTable.remove(ctx, r, connUUID) })
}

// CreateVolumeTarget inserts t and fills t.ID (and UUID and CreatedAt when
// empty).
func (s *DB) CreateVolumeTarget(ctx context.Context, t *VolumeTarget) error {
	return s.write(ctx, func(r runner) error { return targetTable.create(ctx, r, t) })
}

// GetVolumeTarget finds a target by UUID.
func (s *DB) GetVolumeTarget(ctx context.Context, targetUUID string) (*VolumeTarget, error) {
	return targetTable.get(ctx, s.reader(), targetUUID)
}

// ListVolumeTargets returns the targets matching q, one page of them when
// q.Limit is set.
func (s *DB) ListVolumeTargets(ctx context.Context, q VolumeQuery) ([]*VolumeTarget, error) {
	return targetTable.list(ctx, s.reader(), q.filter(), q.Page)
}

// UpdateVolumeTarget reads the target, applies fn and writes it back in one
// write transaction. An error from fn is returned unchanged.
func (s *DB) UpdateVolumeTarget(ctx context.Context, targetUUID string, fn func(t *VolumeTarget) error) (*VolumeTarget, error) {
	return targetTable.update(ctx, s, targetUUID, fn)
}

// DeleteVolumeTarget removes a target.
func (s *DB) DeleteVolumeTarget(ctx context.Context, targetUUID string) error {
	return s.write(ctx, func(r runner) error { return targetTable.remove(ctx, r, targetUUID) })
}

// filter selects the rows of q's node.
func (q VolumeQuery) filter() *filter {
	f := &filter{}
	f.eq("node_uuid", q.NodeUUID, uuidKey)
	projectFilter(f, q.Project)
	return f
}
