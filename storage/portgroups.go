package storage

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Portgroup is a group of a node's ports (a bond, LAG or MLAG), Ironic's
// portgroup. Ports join one through Port.PortgroupUUID.
type Portgroup struct {
	ID                       int64
	UUID                     string
	Name                     *string
	NodeUUID                 string
	Address                  *string // lower-case MAC, optional
	Extra                    JSONObject
	InternalInfo             JSONObject
	StandalonePortsSupported bool
	Mode                     *string // bonding mode; Ironic fills a default on create
	Properties               JSONObject
	PhysicalNetwork          *string // API 1.102
	Category                 *string // API 1.103
	DynamicPortgroup         bool    // API 1.111, read-only
	CreatedAt                time.Time
	UpdatedAt                *time.Time
}

// PortgroupQuery filters a portgroup list. Nil pointers mean "no filter".
type PortgroupQuery struct {
	Page
	NodeUUID *string
	Address  *string
	// Shards and ConductorGroups, when non-nil, keep the portgroups whose
	// node is in one of them (API 1.106, 1.99).
	Shards          []string
	ConductorGroups []string
	// Project, when set, keeps the portgroups of nodes it owns or leases.
	Project *string
}

// PortgroupStore keeps portgroups.
type PortgroupStore interface {
	// CreatePortgroup inserts pg and fills pg.ID (and UUID and CreatedAt
	// when empty). Duplicates are Ironic's Conflicts; an unknown node is
	// NodeNotFound.
	CreatePortgroup(ctx context.Context, pg *Portgroup) error
	// GetPortgroup finds a portgroup by UUID, or by name when ident is not
	// a UUID.
	GetPortgroup(ctx context.Context, ident string) (*Portgroup, error)
	ListPortgroups(ctx context.Context, q PortgroupQuery) ([]*Portgroup, error)
	// UpdatePortgroup reads the portgroup, applies fn and writes it back
	// atomically, setting UpdatedAt. An error from fn is returned unchanged.
	UpdatePortgroup(ctx context.Context, uuid string, fn func(pg *Portgroup) error) (*Portgroup, error)
	// DeletePortgroup removes a portgroup that has no ports (else an
	// InUseError naming it by its id, as Ironic's PortgroupNotEmpty does).
	DeletePortgroup(ctx context.Context, uuid string) error
}

var portgroupTable = resourceTable("portgroups", func(pg *Portgroup) (*int64, *string, *time.Time, **time.Time) {
	return &pg.ID, &pg.UUID, &pg.CreatedAt, &pg.UpdatedAt
}, []column[Portgroup]{
	nullStrCol("name", func(pg *Portgroup) **string { return &pg.Name }),
	strCol("node_uuid", func(pg *Portgroup) *string { return &pg.NodeUUID }),
	nullStrCol("address", func(pg *Portgroup) **string { return &pg.Address }),
	objectCol("extra", func(pg *Portgroup) *JSONObject { return &pg.Extra }),
	objectCol("internal_info", func(pg *Portgroup) *JSONObject { return &pg.InternalInfo }),
	boolCol("standalone_ports_supported", func(pg *Portgroup) *bool { return &pg.StandalonePortsSupported }),
	nullStrCol("mode", func(pg *Portgroup) **string { return &pg.Mode }),
	objectCol("properties", func(pg *Portgroup) *JSONObject { return &pg.Properties }),
	nullStrCol("physical_network", func(pg *Portgroup) **string { return &pg.PhysicalNetwork }),
	nullStrCol("category", func(pg *Portgroup) **string { return &pg.Category }),
	boolCol("dynamic_portgroup", func(pg *Portgroup) *bool { return &pg.DynamicPortgroup }),
}, record[Portgroup]{
	normalize: normalizePortgroup,
	unique: map[string]func(*Portgroup) []string{
		"name":    one(func(pg *Portgroup) string { return deref(pg.Name) }),
		"address": one(func(pg *Portgroup) string { return deref(pg.Address) }),
	},
	parent: func(pg *Portgroup) string { return pg.NodeUUID },
	named:  true,
})

// normalizePortgroup gives pg its stored shape: lower-case MAC, canonical
// node UUID, UTC microsecond times, non-nil maps.
func normalizePortgroup(pg *Portgroup) {
	if pg.Address != nil {
		a := strings.ToLower(*pg.Address)
		pg.Address = &a
	}
	pg.NodeUUID = uuidKey(pg.NodeUUID)
	orEmpty(&pg.Extra, &pg.InternalInfo, &pg.Properties)
}

// CreatePortgroup inserts pg and fills pg.ID.
func (s *DB) CreatePortgroup(ctx context.Context, pg *Portgroup) error {
	return s.write(ctx, func(r runner) error { return portgroupTable.create(ctx, r, pg) })
}

// GetPortgroup finds a portgroup by UUID, or by name when ident is not one.
func (s *DB) GetPortgroup(ctx context.Context, ident string) (*Portgroup, error) {
	return portgroupTable.get(ctx, s.reader(), ident)
}

// ListPortgroups returns the portgroups matching q, one page of them when
// q.Limit is set.
func (s *DB) ListPortgroups(ctx context.Context, q PortgroupQuery) ([]*Portgroup, error) {
	f := &filter{}
	f.eq("node_uuid", q.NodeUUID, uuidKey)
	f.eq("address", q.Address, strings.ToLower)
	for col, vals := range map[string][]string{"shard": q.Shards, "conductor_group": q.ConductorGroups} {
		if vals != nil {
			sub := &filter{}
			sub.in(col, vals)
			f.add("node_uuid IN (SELECT uuid FROM nodes"+sub.where()+")", sub.args...)
		}
	}
	projectFilter(f, q.Project)
	return portgroupTable.list(ctx, s.reader(), f, q.Page)
}

// UpdatePortgroup reads the portgroup, applies fn and writes the changed
// columns back in one write transaction.
func (s *DB) UpdatePortgroup(ctx context.Context, pgUUID string, fn func(pg *Portgroup) error) (*Portgroup, error) {
	return portgroupTable.update(ctx, s, pgUUID, fn)
}

// DeletePortgroup removes a portgroup without ports. The check and the
// delete share one write transaction, so a port cannot join in between.
func (s *DB) DeletePortgroup(ctx context.Context, pgUUID string) error {
	return s.writeTx(ctx, func(r runner) error {
		pg, err := portgroupTable.get(ctx, r, pgUUID)
		if err != nil {
			return err
		}
		// Ironic names the portgroup by its database id here.
		inUse := &InUseError{Table: "portgroups", Key: strconv.FormatInt(pg.ID, 10), By: "ports"}
		if err := refuseInUse(ctx, r, "ports", "portgroup_uuid", pg.UUID, inUse); err != nil {
			return err
		}
		if _, err := r.exec(ctx, "DELETE FROM portgroups WHERE id = ?", pg.ID); err != nil {
			return fmt.Errorf("storage: delete portgroup %s: %w", pg.UUID, err)
		}
		return nil
	})
}
