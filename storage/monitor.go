package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// CheckWritable proves the database takes a write now (for readiness): it
// records the time of the check in write_checks, through the group commit
// like every write, so a full disk, a read-only file or a write lock held
// elsewhere fail here. (Rewriting a row with its own values would not do:
// SQLite skips writing a page whose content is unchanged.)
func (s *DB) CheckWritable(ctx context.Context, conductor string) error {
	at := formatTime(time.Now())
	err := s.writeTx(ctx, func(r runner) error {
		_, err := r.exec(ctx, `INSERT INTO write_checks (conductor, checked_at) VALUES (?, ?)
			ON CONFLICT (conductor) DO UPDATE SET checked_at = excluded.checked_at`, conductor, at)
		return err
	})
	if err != nil {
		return fmt.Errorf("storage: write check: %w", err)
	}
	return nil
}

// NodeStateCount is how many nodes share a provision state, power state
// ("" when unknown) and maintenance flag.
type NodeStateCount struct {
	ProvisionState string
	PowerState     string
	Maintenance    bool
	Count          int
}

// CountNodes groups the nodes by state (for metrics).
func (s *DB) CountNodes(ctx context.Context) ([]NodeStateCount, error) {
	return queryAll(ctx, s.reader(), nil, "count nodes", func(rows *sql.Rows, c *NodeStateCount) error {
		return rows.Scan(&c.ProvisionState, &c.PowerState, &c.Maintenance, &c.Count)
	}, `SELECT provision_state, COALESCE(power_state, ''), maintenance, COUNT(*)
		FROM nodes GROUP BY provision_state, COALESCE(power_state, ''), maintenance`)
}

// NodeCount is the number of nodes (what sizes the API's view cache).
func (s *DB) NodeCount(ctx context.Context) (int, error) {
	var n int
	if err := s.reader().queryRow(ctx, "SELECT COUNT(*) FROM nodes").Scan(&n); err != nil {
		return 0, fmt.Errorf("storage: count nodes: %w", err)
	}
	return n, nil
}
