package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"castiron/engine/fault"
)

// portSQL is the generated SQL of the ports table.
type portSQL struct {
	table[Port]
	byUUID    string
	byAddress string
	update    string
}

func newPortSQL() portSQL {
	t := newTable("ports", "id", func(p *Port) *int64 { return &p.ID }, []column[Port]{
		fixedCol("uuid", func(p *Port) any { return &p.UUID }),
		col("name", func(p *Port) any { return &p.Name }),
		col("node_uuid", func(p *Port) any { return &p.NodeUUID }),
		col("portgroup_uuid", func(p *Port) any { return &p.PortgroupUUID }),
		col("address", func(p *Port) any { return &p.Address }),
		docCol("local_link_connection", func(p *Port) any { return objectCol{&p.LocalLinkConnection} }),
		col("pxe_enabled", func(p *Port) any { return &p.PXEEnabled }),
		col("physical_network", func(p *Port) any { return &p.PhysicalNetwork }),
		docCol("internal_info", func(p *Port) any { return objectCol{&p.InternalInfo} }),
		docCol("extra", func(p *Port) any { return objectCol{&p.Extra} }),
		col("is_smartnic", func(p *Port) any { return &p.IsSmartNIC }),
		fixedCol("created_at", func(p *Port) any { return timeCol{&p.CreatedAt} }),
		col("updated_at", func(p *Port) any { return nullTimeCol{&p.UpdatedAt} }),
	})
	return portSQL{
		table:     t,
		byUUID:    t.selectFrom() + " WHERE uuid = ?",
		byAddress: t.selectFrom() + " WHERE address = ?",
		update:    "UPDATE ports SET " + t.updateSet + " WHERE id = ?",
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
	if err := s.w.QueryRowContext(ctx, s.ports.insert, s.ports.insertArgs(p)...).Scan(&p.ID); err != nil {
		return portWriteError(err, p)
	}
	return nil
}

// GetPort finds a port by UUID.
func (s *SQLite) GetPort(ctx context.Context, portUUID string) (*Port, error) {
	return s.ports.getOne(ctx, s.r, fault.PortNotFound(portUUID), s.ports.byUUID, uuidKey(portUUID))
}

// GetPortByAddress finds a port by MAC address, in any letter case.
func (s *SQLite) GetPortByAddress(ctx context.Context, address string) (*Port, error) {
	return s.ports.getOne(ctx, s.r, fault.PortNotFound(address), s.ports.byAddress, strings.ToLower(address))
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
	return s.ports.paged(ctx, s.r, f, q.Page, pageSpec{
		defaultSort:    "id",
		markerCol:      "uuid",
		markerNotFound: fault.PortNotFound,
	})
}

// UpdatePort reads the port, applies fn and writes it back atomically,
// setting UpdatedAt. An error from fn is returned unchanged.
func (s *SQLite) UpdatePort(ctx context.Context, portUUID string, fn func(p *Port) error) (*Port, error) {
	var out *Port
	err := s.writeTx(ctx, func(tx *sql.Tx) error {
		p, err := s.ports.getOne(ctx, tx, fault.PortNotFound(portUUID), s.ports.byUUID, uuidKey(portUUID))
		if err != nil {
			return err
		}
		id, pu, created := p.ID, p.UUID, p.CreatedAt
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
		if _, err := tx.ExecContext(ctx, s.ports.update, s.ports.updateArgs(p, p.ID)...); err != nil {
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
	res, err := s.w.ExecContext(ctx, "DELETE FROM ports WHERE uuid = ?", uuidKey(portUUID))
	if err != nil {
		return fmt.Errorf("storage: delete port %s: %w", portUUID, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("storage: delete port %s: %w", portUUID, err)
	} else if n == 0 {
		return fault.PortNotFound(portUUID)
	}
	return nil
}
