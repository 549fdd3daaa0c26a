package storage

import (
	"context"
	"database/sql"
	"sync"
	"time"
)

// PostgreSQL plans from table statistics that only ANALYZE (autovacuum's,
// at most once a minute, after 10 % of the rows changed) gathers. A fleet
// enrolled in one go has none for a while, and without them the planner
// takes the node list's "parent_node IS NULL" to match 0.5 % of the rows:
// it then reads and sorts every node after the marker instead of walking
// the primary key for 100 of them (3-5 ms instead of 0.1 ms at 10,000
// nodes, issue 28). InnoDB, Ironic's usual database, recomputes a table's
// statistics in the background once 10 % of it changed; nodeStats does
// that for the nodes table.
const (
	analyzeMinRows  = 200
	analyzeFraction = 10 // re-analyze after 1/analyzeFraction of the rows changed
	analyzeTimeout  = time.Minute
)

// nodeStats counts node creates and deletes and runs ANALYZE nodes in the
// background when enough have accumulated; one at a time, stopped by
// close. A nil *nodeStats (SQLite, which plans without such statistics
// here) does nothing.
type nodeStats struct {
	db *sql.DB

	mu        sync.Mutex
	changed   int64
	threshold int64
	running   bool
	closed    bool
	wg        sync.WaitGroup
	ctx       context.Context
	cancel    context.CancelFunc
}

func newNodeStats(db *sql.DB) *nodeStats {
	ctx, cancel := context.WithCancel(context.Background())
	return &nodeStats{db: db, threshold: analyzeMinRows, ctx: ctx, cancel: cancel}
}

// note records n rows created or deleted.
func (k *nodeStats) note(n int64) {
	if k == nil {
		return
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.changed += n
	if k.changed < k.threshold || k.running || k.closed {
		return
	}
	k.changed, k.running = 0, true
	k.wg.Add(1)
	go k.analyze()
}

func (k *nodeStats) analyze() {
	defer k.wg.Done()
	ctx, cancel := context.WithTimeout(k.ctx, analyzeTimeout)
	defer cancel()
	var rows float64
	_, err := k.db.ExecContext(ctx, "ANALYZE nodes")
	if err == nil {
		err = k.db.QueryRowContext(ctx, "SELECT reltuples FROM pg_class WHERE oid = 'nodes'::regclass").Scan(&rows)
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	k.running = false
	if err == nil {
		k.threshold = max(analyzeMinRows, int64(rows)/analyzeFraction)
	}
}

// close stops a running ANALYZE and waits for it.
func (k *nodeStats) close() {
	if k == nil {
		return
	}
	k.mu.Lock()
	k.closed = true
	k.mu.Unlock()
	k.cancel()
	k.wg.Wait()
}
