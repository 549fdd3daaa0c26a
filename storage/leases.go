package storage

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/netip"
	"time"

	"castiron/fault"
)

// Lease is one DHCP address binding (pxe/dhcp). It is keyed on the client's
// hardware address (chaddr), never on option 61 or a DHCPv6 DUID, so a
// machine keeps its address from firmware PXE through iPXE to the ramdisk.
type Lease struct {
	MAC string     // aa:bb:cc:dd:ee:ff, lower case
	IP  netip.Addr // IPv4 (the SQLite store's own methods), IPv6 (Leases6)
	// Expires is when the lease ends. An expired lease still ties the
	// address to the MAC until another MAC takes the address over.
	Expires   time.Time
	NodeUUID  string // the node the boot gate matched; empty when unknown
	UpdatedAt time.Time
}

// LeaseConflictError (a fault.Conflict) is returned when a lease's
// address is held by another MAC whose lease has not expired.
type LeaseConflictError struct {
	IP     netip.Addr
	HeldBy string
}

func (e *LeaseConflictError) Error() string {
	return fmt.Sprintf("address %s is leased to %s", e.IP, e.HeldBy)
}

// FaultKind implements fault.Classified.
func (e *LeaseConflictError) FaultKind() fault.Kind { return fault.Conflict }

// LeaseStore keeps DHCP leases durable.
type LeaseStore interface {
	// PutLease inserts or replaces the lease of l.MAC. It returns once the
	// lease is durable. A lease of another MAC on the same address that
	// expired by l.UpdatedAt (the write's "now", default time.Now()) is taken
	// over (deleted); an unexpired one gives a *LeaseConflictError.
	// Concurrent calls share commits.
	PutLease(ctx context.Context, l Lease) error
	// PutLeases is PutLease for many leases in one transaction: errs[i]
	// is the outcome of ls[i]; err (nothing stored) when the database
	// failed.
	PutLeases(ctx context.Context, ls []Lease) (errs []error, err error)
	// GetLease returns the lease of mac, or a NotFoundError.
	GetLease(ctx context.Context, mac string) (Lease, error)
	// ListLeases returns every lease, expired ones included, ordered by MAC.
	ListLeases(ctx context.Context) ([]Lease, error)
	// DeleteLease forgets the lease of mac; no error when there is none.
	DeleteLease(ctx context.Context, mac string) error
	// PruneLeases deletes leases that expired before before.
	PruneLeases(ctx context.Context, before time.Time) (int64, error)
}

var (
	_ LeaseStore = (*DB)(nil)
	_ LeaseStore = (*leaseTable)(nil)
)

// leaseTable is one lease table: dhcp_leases (IPv4) or dhcp6_leases (IPv6).
// The SQLite store's own LeaseStore methods are those of its IPv4 table.
type leaseTable struct {
	s    *DB
	name string
	v6   bool
}

func (s *DB) leases4() *leaseTable { return &leaseTable{s: s, name: "dhcp_leases"} }

// Leases6 is the store of DHCPv6 leases: the same contract as the IPv4
// LeaseStore methods, for IPv6 addresses, in a table of its own.
func (s *DB) Leases6() LeaseStore { return &leaseTable{s: s, name: "dhcp6_leases", v6: true} }

func (t *leaseTable) upsert() string {
	return `INSERT INTO ` + t.name + ` (mac, ip, expires_at, node_uuid, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (mac) DO UPDATE SET ip = excluded.ip, expires_at = excluded.expires_at,
		node_uuid = excluded.node_uuid, updated_at = excluded.updated_at`
}

func (t *leaseTable) columns() string {
	return `SELECT mac, ip, expires_at, node_uuid, updated_at FROM ` + t.name
}

// normal validates l and returns it in its stored form.
func (t *leaseTable) normal(l Lease) (Lease, error) {
	hw, err := net.ParseMAC(l.MAC)
	if err != nil || len(hw) != 6 {
		return l, &InvalidError{Table: t.name, Column: "mac", Value: l.MAC}
	}
	l.MAC = hw.String()
	if l.IP.Is4In6() {
		l.IP = l.IP.Unmap()
	}
	if !l.IP.IsValid() || l.IP.Is6() != t.v6 || l.IP.Zone() != "" {
		return l, &InvalidError{Table: t.name, Column: "ip", Value: l.IP.String()}
	}
	if l.UpdatedAt.IsZero() {
		l.UpdatedAt = time.Now()
	}
	l.Expires, l.UpdatedAt = normTime(l.Expires), normTime(l.UpdatedAt)
	return l, nil
}

// PutLease implements LeaseStore.
func (s *DB) PutLease(ctx context.Context, l Lease) error { return s.leases4().PutLease(ctx, l) }

// PutLeases implements LeaseStore.
func (s *DB) PutLeases(ctx context.Context, ls []Lease) ([]error, error) {
	return s.leases4().PutLeases(ctx, ls)
}

// GetLease implements LeaseStore.
func (s *DB) GetLease(ctx context.Context, mac string) (Lease, error) {
	return s.leases4().GetLease(ctx, mac)
}

// ListLeases implements LeaseStore.
func (s *DB) ListLeases(ctx context.Context) ([]Lease, error) { return s.leases4().ListLeases(ctx) }

// DeleteLease implements LeaseStore.
func (s *DB) DeleteLease(ctx context.Context, mac string) error {
	return s.leases4().DeleteLease(ctx, mac)
}

// PruneLeases implements LeaseStore.
func (s *DB) PruneLeases(ctx context.Context, before time.Time) (int64, error) {
	return s.leases4().PruneLeases(ctx, before)
}

// PutLease implements LeaseStore.
func (t *leaseTable) PutLease(ctx context.Context, l Lease) error {
	errs, err := t.PutLeases(ctx, []Lease{l})
	if err != nil {
		return err
	}
	return errs[0]
}

// PutLeases implements LeaseStore: one write transaction (one job of the
// group commit, no savepoint per lease) for many leases. A lease that fails
// (conflict, invalid) fails alone: SQLite's default ABORT undoes only the
// failing statement, the rest of the transaction stands.
func (t *leaseTable) PutLeases(ctx context.Context, ls []Lease) ([]error, error) {
	errs := make([]error, len(ls))
	norm := make([]Lease, len(ls))
	valid := 0
	for i, l := range ls {
		if norm[i], errs[i] = t.normal(l); errs[i] == nil {
			valid++
		}
	}
	if valid == 0 {
		return errs, nil
	}
	err := t.s.writeTx(ctx, func(r runner) error {
		for i, l := range norm {
			if errs[i] != nil {
				continue
			}
			if err := t.put(ctx, r, l); err != nil {
				if !fault.Is(err, fault.Conflict) {
					return err // the database failed: nothing of the batch stands
				}
				errs[i] = err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return errs, nil
}

// put writes one lease. The usual write (a MAC renewing, or taking a
// never-used address) is one statement; only when the address is still
// stored for another MAC does it check whether that lease expired.
func (t *leaseTable) put(ctx context.Context, r runner, l Lease) error {
	args := []any{l.MAC, l.IP.String(), formatTime(l.Expires), l.NodeUUID, formatTime(l.UpdatedAt)}
	upsert := func() error {
		return savepoint(ctx, r, func() error { _, err := r.exec(ctx, t.upsert(), args...); return err })
	}
	err := upsert()
	if err == nil {
		return nil
	}
	if v, ok := violationOf(err); !ok || v.unique != "ip" {
		return fmt.Errorf("storage: put lease: %w", err)
	}
	res, err := r.exec(ctx, `DELETE FROM `+t.name+` WHERE ip = ? AND mac <> ? AND expires_at <= ?`, l.IP.String(), l.MAC, formatTime(l.UpdatedAt))
	if err != nil {
		return fmt.Errorf("storage: put lease: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		var holder string
		if err := r.queryRow(ctx, "SELECT mac FROM "+t.name+" WHERE ip = ?", l.IP.String()).Scan(&holder); err != nil {
			return fmt.Errorf("storage: put lease: %w", err)
		}
		return &LeaseConflictError{IP: l.IP, HeldBy: holder}
	}
	if err := upsert(); err != nil {
		// On PostgreSQL another conductor may have committed the address
		// since the delete: the unique index still decides.
		if v, ok := violationOf(err); ok && v.unique == "ip" {
			return &LeaseConflictError{IP: l.IP}
		}
		return fmt.Errorf("storage: put lease: %w", err)
	}
	return nil
}

// GetLease implements LeaseStore.
func (t *leaseTable) GetLease(ctx context.Context, mac string) (Lease, error) {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return Lease{}, &NotFoundError{Table: t.name, Key: mac}
	}
	ls, err := queryAll(ctx, t.s.reader(), nil, "get lease", scanLease, t.columns()+" WHERE mac = ?", hw.String())
	if err != nil {
		return Lease{}, err
	}
	if len(ls) == 0 {
		return Lease{}, &NotFoundError{Table: t.name, Key: hw.String()}
	}
	return ls[0], nil
}

// ListLeases implements LeaseStore.
func (t *leaseTable) ListLeases(ctx context.Context) ([]Lease, error) {
	return queryAll(ctx, t.s.reader(), nil, "list leases", scanLease, t.columns()+" ORDER BY mac")
}

// DeleteLease implements LeaseStore.
func (t *leaseTable) DeleteLease(ctx context.Context, mac string) error {
	hw, err := net.ParseMAC(mac)
	if err != nil {
		return nil // such a MAC can hold no lease
	}
	return t.s.writeTx(ctx, func(r runner) error {
		if _, err := r.exec(ctx, "DELETE FROM "+t.name+" WHERE mac = ?", hw.String()); err != nil {
			return fmt.Errorf("storage: delete lease: %w", err)
		}
		return nil
	})
}

// PruneLeases implements LeaseStore.
func (t *leaseTable) PruneLeases(ctx context.Context, before time.Time) (int64, error) {
	var n int64
	err := t.s.writeTx(ctx, func(r runner) error {
		res, err := r.exec(ctx, "DELETE FROM "+t.name+" WHERE expires_at < ?", formatTime(before))
		if err != nil {
			return fmt.Errorf("storage: prune leases: %w", err)
		}
		n, _ = res.RowsAffected()
		return nil
	})
	return n, err
}

func scanLease(rows *sql.Rows, l *Lease) error {
	var ip string
	if err := rows.Scan(&l.MAC, &ip, timestamp{&l.Expires}, &l.NodeUUID, timestamp{&l.UpdatedAt}); err != nil {
		return err
	}
	var err error
	if l.IP, err = netip.ParseAddr(ip); err != nil {
		return fmt.Errorf("lease of %s: %w", l.MAC, err)
	}
	return nil
}
