package storage

import (
	"context"
	"fmt"
	"time"
)

// conductorSQL is the generated SQL of the conductors table.
type conductorSQL struct {
	table[Conductor]
	byHostname string
	upsert     string
}

func newConductorSQL() conductorSQL {
	t := newTable("conductors", "hostname", nil, []column[Conductor]{
		fixed(strCol("hostname", func(c *Conductor) *string { return &c.Hostname })),
		strCol("conductor_group", func(c *Conductor) *string { return &c.ConductorGroup }),
		listCol("drivers", func(c *Conductor) *[]string { return &c.Drivers }),
		boolCol("online", func(c *Conductor) *bool { return &c.Online }),
		strCol("api_url", func(c *Conductor) *string { return &c.APIURL }),
		fixed(timeCol("created_at", func(c *Conductor) *time.Time { return &c.CreatedAt })),
		nullTimeCol("updated_at", func(c *Conductor) **time.Time { return &c.UpdatedAt }),
	})
	// ON CONFLICT ... DO UPDATE with excluded.* is shared by SQLite (>= 3.24)
	// and PostgreSQL. created_at is left alone: it records the first
	// registration.
	upsert := t.insert + " ON CONFLICT (hostname) DO UPDATE SET " +
		"conductor_group = excluded.conductor_group, drivers = excluded.drivers, " +
		"online = excluded.online, api_url = excluded.api_url, updated_at = excluded.updated_at RETURNING created_at"
	return conductorSQL{
		table:      t,
		byHostname: t.selectFrom() + " WHERE hostname = ?",
		upsert:     upsert,
	}
}

func conductorNotFound(hostname string) error {
	return &NotFoundError{Table: "conductors", Key: hostname}
}

// RegisterConductor inserts or replaces a conductor row and marks it
// online. On re-registration the first created_at is kept and copied into c.
func (s *DB) RegisterConductor(ctx context.Context, c *Conductor) error {
	now := time.Now()
	if c.CreatedAt.IsZero() {
		c.CreatedAt = now
	}
	c.CreatedAt = normTime(c.CreatedAt)
	heartbeat := normTime(now)
	c.UpdatedAt = &heartbeat
	c.Online = true
	if c.Drivers == nil {
		c.Drivers = []string{}
	}
	err := s.write(ctx, func(r runner) error {
		return r.queryRow(ctx, s.conds.upsert, s.conds.insertArgs(c)...).Scan(timestamp{&c.CreatedAt})
	})
	if err != nil {
		return fmt.Errorf("storage: register conductor %s: %w", c.Hostname, err)
	}
	return nil
}

// setConductor updates one registered conductor; an unknown one is NotFound.
func (s *DB) setConductor(ctx context.Context, hostname, query string, args ...any) error {
	nf := conductorNotFound(hostname)
	err := s.write(ctx, func(r runner) error { return execOne(ctx, r, nf, query, args...) })
	if err != nil && err != nf {
		return fmt.Errorf("storage: update conductor %s: %w", hostname, err)
	}
	return err
}

// TouchConductor records a heartbeat at t and, as Ironic's touch does,
// marks the conductor online again.
func (s *DB) TouchConductor(ctx context.Context, hostname string, t time.Time) error {
	return s.setConductor(ctx, hostname,
		"UPDATE conductors SET updated_at = ?, online = ? WHERE hostname = ?", formatTime(t), true, hostname)
}

// UnregisterConductor marks it offline (clean shutdown).
func (s *DB) UnregisterConductor(ctx context.Context, hostname string) error {
	return s.setConductor(ctx, hostname,
		"UPDATE conductors SET online = ? WHERE hostname = ?", false, hostname)
}

// GetConductor finds a conductor, online or not.
func (s *DB) GetConductor(ctx context.Context, hostname string) (*Conductor, error) {
	return s.conds.getOne(ctx, s.reader(), conductorNotFound(hostname), s.conds.byHostname, hostname)
}

// ListConductors lists conductors, by hostname unless page says otherwise.
// The marker is a hostname.
func (s *DB) ListConductors(ctx context.Context, page Page) ([]*Conductor, error) {
	if page.SortKey == "id" {
		// Ironic's default sort key; hostname is this table's key and
		// registration order is not kept.
		page.SortKey = ""
	}
	return s.conds.paged(ctx, s.reader(), &filter{}, page, pageSpec{
		defaultSort: "hostname",
		markerCol:   "hostname",
	})
}
