package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"castiron/fault"
)

// portSQL is the generated SQL of the ports table.
type portSQL struct {
	table[Port]
	byUUID    string
	byAddress string
}

func newPortSQL() portSQL {
	t := newTable("ports", "id", func(p *Port) *int64 { return &p.ID }, []column[Port]{
		fixed(strCol("uuid", func(p *Port) *string { return &p.UUID })),
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
		fixed(timeCol("created_at", func(p *Port) *time.Time { return &p.CreatedAt })),
		nullTimeCol("updated_at", func(p *Port) **time.Time { return &p.UpdatedAt }),
	})
	return portSQL{
		table:     t,
		byUUID:    t.selectFrom() + " WHERE uuid = ?",
		byAddress: t.selectFrom() + " WHERE address = ?",
	}
}

// normalizePort gives p its stored shape: lower-case MAC, canonical UUIDs,
// UTC microsecond times, non-nil maps.
func normalizePort(p *Port) {
	p.Address = strings.ToLower(p.Address)
	p.NodeUUID = uuidKey(p.NodeUUID)
	p.CreatedAt = normTime(p.CreatedAt)
	p.UpdatedAt = normTimePtr(p.UpdatedAt)
	for _, m := range []*JSONObject{&p.LocalLinkConnection, &p.InternalInfo, &p.Extra} {
		if *m == nil {
			*m = JSONObject{}
		}
	}
}

func portWriteError(err error, p *Port) error {
	if v, ok := violationOf(err); ok {
		switch {
		case v.foreign:
			return fault.NodeNotFound(p.NodeUUID)
		case v.unique == "ports.uuid":
			return fault.New(fault.Conflict, "A port with UUID %s already exists.", p.UUID)
		case v.unique == "ports.address":
			return fault.New(fault.Conflict, "A port with MAC address %s already exists.", p.Address)
		case v.unique == "ports.name":
			return fault.New(fault.Conflict, "A port with name %s already exists.", deref(p.Name))
		}
	}
	return fmt.Errorf("storage: write port %s: %w", p.UUID, err)
}

// CreatePort inserts p and fills p.ID (and UUID and CreatedAt when empty).
// An unknown node gives NodeNotFound.
func (s *SQLite) CreatePort(ctx context.Context, p *Port) error {
	if p.UUID == "" {
		p.UUID = uuid.NewString()
	} else if u, ok := canonicalUUID(p.UUID); ok {
		p.UUID = u
	} else {
		return fault.New(fault.Invalid, "Expected a UUID but received %s.", p.UUID)
	}
	if p.CreatedAt.IsZero() {
		p.CreatedAt = time.Now()
	}
	normalizePort(p)
	if err := s.writer().queryRow(ctx, s.ports.insert, s.ports.insertArgs(p)...).Scan(&p.ID); err != nil {
		return portWriteError(err, p)
	}
	return nil
}

// GetPort finds a port by UUID.
func (s *SQLite) GetPort(ctx context.Context, portUUID string) (*Port, error) {
	return s.ports.getOne(ctx, s.reader(), fault.PortNotFound(portUUID), s.ports.byUUID, uuidKey(portUUID))
}

// GetPortByAddress finds a port by MAC address, in any letter case.
func (s *SQLite) GetPortByAddress(ctx context.Context, address string) (*Port, error) {
	return s.ports.getOne(ctx, s.reader(), fault.PortNotFound(address), s.ports.byAddress, strings.ToLower(address))
}

// ListPorts returns the ports matching q, one page of them when q.Limit is set.
func (s *SQLite) ListPorts(ctx context.Context, q PortQuery) ([]*Port, error) {
	f := &filter{}
	if q.NodeUUID != nil {
		f.add("node_uuid = ?", uuidKey(*q.NodeUUID))
	}
	if q.Address != nil {
		f.add("address = ?", strings.ToLower(*q.Address))
	}
	if q.PortgroupUUID != nil {
		f.add("portgroup_uuid = ?", uuidKey(*q.PortgroupUUID))
	}
	if q.Shards != nil {
		sub := &filter{}
		sub.in("shard", q.Shards)
		f.add("node_uuid IN (SELECT uuid FROM nodes"+sub.where()+")", sub.args...)
	}
	return s.ports.paged(ctx, s.reader(), f, q.Page, pageSpec{
		defaultSort:    "id",
		markerCol:      "uuid",
		markerNotFound: fault.PortNotFound,
	})
}

// UpdatePort reads the port, applies fn and writes it back atomically,
// setting UpdatedAt. An error from fn is returned unchanged.
func (s *SQLite) UpdatePort(ctx context.Context, portUUID string, fn func(p *Port) error) (*Port, error) {
	var out *Port
	err := s.writeTx(ctx, func(r runner) error {
		p, err := s.ports.getOne(ctx, r, fault.PortNotFound(portUUID), s.ports.byUUID, uuidKey(portUUID))
		if err != nil {
			return err
		}
		id, pu, created := p.ID, p.UUID, p.CreatedAt
		before, err := s.ports.values(p)
		if err != nil {
			return err
		}
		if err := fn(p); err != nil {
			return err
		}
		if p.ID != id || p.UUID != pu {
			return fmt.Errorf("storage: update port %s: id and uuid cannot change", pu)
		}
		p.CreatedAt = created
		now := time.Now()
		p.UpdatedAt = &now
		normalizePort(p)
		after, err := s.ports.values(p)
		if err != nil {
			return err
		}
		if err := s.ports.updateChanged(ctx, r, before, after, p.ID); err != nil {
			return portWriteError(err, p)
		}
		out = p
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeletePort removes a port.
func (s *SQLite) DeletePort(ctx context.Context, portUUID string) error {
	err := execOne(ctx, s.writer(), fault.PortNotFound(portUUID), "DELETE FROM ports WHERE uuid = ?", uuidKey(portUUID))
	if err != nil && !fault.Is(err, fault.NotFound) {
		return fmt.Errorf("storage: delete port %s: %w", portUUID, err)
	}
	return err
}
