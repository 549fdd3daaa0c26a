package storage

import (
	"context"
	"strings"
	"time"
)

// portSQL is the generated SQL of the ports table.
type portSQL struct {
	table[Port]
	byAddress string
}

func newPortSQL() portSQL {
	t := resourceTable("ports", func(p *Port) (*int64, *string, *time.Time, **time.Time) {
		return &p.ID, &p.UUID, &p.CreatedAt, &p.UpdatedAt
	}, []column[Port]{
		nullStrCol("name", func(p *Port) **string { return &p.Name }),
		strCol("node_uuid", func(p *Port) *string { return &p.NodeUUID }),
		nullStrCol("portgroup_uuid", func(p *Port) **string { return &p.PortgroupUUID }),
		strCol("address", func(p *Port) *string { return &p.Address }),
		objectCol("local_link_connection", func(p *Port) *JSONObject { return &p.LocalLinkConnection }),
		boolCol("pxe_enabled", func(p *Port) *bool { return &p.PXEEnabled }),
		nullStrCol("physical_network", func(p *Port) **string { return &p.PhysicalNetwork }),
		objectCol("internal_info", func(p *Port) *JSONObject { return &p.InternalInfo }),
		objectCol("extra", func(p *Port) *JSONObject { return &p.Extra }),
		boolCol("is_smartnic", func(p *Port) *bool { return &p.IsSmartNIC }),
		nullStrCol("description", func(p *Port) **string { return &p.Description }),
		nullStrCol("vendor", func(p *Port) **string { return &p.Vendor }),
		nullStrCol("category", func(p *Port) **string { return &p.Category }),
		boolCol("available_for_dynamic_portgroup", func(p *Port) *bool { return &p.AvailableForDynamicPortgroup }),
	}, record[Port]{
		normalize: normalizePort,
		unique: map[string]func(*Port) []string{
			"address": one(func(p *Port) string { return p.Address }),
			"name":    one(func(p *Port) string { return deref(p.Name) }),
		},
		parent: func(p *Port) string { return p.NodeUUID },
	})
	return portSQL{
		table:     t,
		byAddress: t.selectFrom() + " WHERE address = ?",
	}
}

// normalizePort gives p its stored shape: lower-case MAC, canonical UUIDs,
// UTC microsecond times, non-nil maps.
func normalizePort(p *Port) {
	p.Address = strings.ToLower(p.Address)
	p.NodeUUID = uuidKey(p.NodeUUID)
	orEmpty(&p.LocalLinkConnection, &p.InternalInfo, &p.Extra)
}

// CreatePort inserts p and fills p.ID (and UUID and CreatedAt when empty).
// An unknown node is a NotFoundError of nodes.
func (s *DB) CreatePort(ctx context.Context, p *Port) error {
	return s.write(ctx, func(r runner) error { return s.ports.create(ctx, r, p) })
}

func portNotFound(ident string) error { return &NotFoundError{Table: "ports", Key: ident} }

// GetPort finds a port by UUID.
func (s *DB) GetPort(ctx context.Context, portUUID string) (*Port, error) {
	return s.ports.get(ctx, s.reader(), portUUID)
}

// GetPortByAddress finds a port by MAC address, in any letter case.
func (s *DB) GetPortByAddress(ctx context.Context, address string) (*Port, error) {
	return s.ports.getOne(ctx, s.reader(), portNotFound(address), s.ports.byAddress, strings.ToLower(address))
}

// ListPorts returns the ports matching q, one page of them when q.Limit is set.
func (s *DB) ListPorts(ctx context.Context, q PortQuery) ([]*Port, error) {
	f := &filter{}
	f.eq("node_uuid", q.NodeUUID, uuidKey)
	f.eq("address", q.Address, strings.ToLower)
	f.eq("portgroup_uuid", q.PortgroupUUID, uuidKey)
	if q.Shards != nil {
		sub := &filter{}
		sub.in("shard", q.Shards)
		f.add("node_uuid IN (SELECT uuid FROM nodes"+sub.where()+")", sub.args...)
	}
	if q.ConductorGroups != nil {
		sub := &filter{}
		sub.in("conductor_group", q.ConductorGroups)
		f.add("node_uuid IN (SELECT uuid FROM nodes"+sub.where()+")", sub.args...)
	}
	if q.DescriptionContains != nil {
		// Case-insensitive, as on Ironic's MySQL.
		f.add(`description `+s.r.d.like()+` ? ESCAPE '\'`, "%"+escapeLike(*q.DescriptionContains)+"%")
	}
	projectFilter(f, q.Project)
	return s.ports.list(ctx, s.reader(), f, q.Page)
}

// UpdatePort reads the port, applies fn and writes it back atomically,
// setting UpdatedAt. An error from fn is returned unchanged.
func (s *DB) UpdatePort(ctx context.Context, portUUID string, fn func(p *Port) error) (*Port, error) {
	return s.ports.update(ctx, s, portUUID, fn)
}

// DeletePort removes a port.
func (s *DB) DeletePort(ctx context.Context, portUUID string) error {
	return s.write(ctx, func(r runner) error { return s.ports.remove(ctx, r, portUUID) })
}

// projectFilter keeps the rows whose node project owns or leases (Ironic's
// project filter on ports, portgroups and volume resources).
func projectFilter(f *filter, project *string) {
	if project != nil {
		f.add("node_uuid IN (SELECT uuid FROM nodes WHERE owner = ? OR lessee = ?)", *project, *project)
	}
}
