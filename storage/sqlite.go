package storage

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// DB is the Store over SQL: embedded SQLite (Open) or a PostgreSQL server
// (OpenPostgres), one set of queries and migrations for both (dialect.go
// says where they differ).
//
// On SQLite all writes go through one connection (SQLite allows one writer
// at a time anyway; queueing in database/sql is cheaper than SQLITE_BUSY
// retries) and a group commit, reads through a small pool of query_only
// connections that WAL lets run beside the writer. On PostgreSQL writes run
// concurrently on a pool, each in its own transaction that locks the rows it
// rewrites (SELECT ... FOR UPDATE), and reads on a pool of read-only
// sessions.
//
// Queries use `?` placeholders; the PostgreSQL dialect rebinds them to $n.
type DB struct {
	w *pool // writer: SQLite: one connection, BEGIN IMMEDIATE
	r *pool // readers: query_only / default_transaction_read_only

	nodes nodeSQL
	ports portSQL
	conds conductorSQL
	hist  eventSQL

	commits *committer    // SQLite: group commit of write transactions; nil on PostgreSQL
	stats   *nodeStats    // PostgreSQL: ANALYZE after bulk node changes; nil on SQLite
	gen     atomic.Uint64 // write transactions ended (WriteGeneration)
	dataVer *dataVersion  // SQLite: every connection's commits (WriteGeneration)
}

// SQLite is DB's name from when SQLite was its only dialect.
type SQLite = DB

var _ Store = (*DB)(nil)

const (
	readerConns = 4
	// foregroundConns serve the reads of operators' requests (Foreground),
	// apart from the readerConns the conductor's tasks and agents share.
	foregroundConns = 2
	// Each pragma is set per connection by the driver when it opens one.
	//
	// synchronous(FULL): in WAL mode SQLite then syncs the WAL at every
	// commit, so a commit that returned survives a power cut (NORMAL syncs
	// only at checkpoints: commits since the last one roll back after a
	// power loss, which lost thousands of acknowledged creates in issue
	// 26's power-cut test). The group commit (commit.go) makes concurrent
	// writers share that one sync.
	writerDSN = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_pragma=foreign_keys(1)&_txlock=immediate"
	readerDSN = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=query_only(1)"
)

// Open opens (creating if needed) the database at path, applies pending
// migrations and returns the store.
func Open(ctx context.Context, path string) (*DB, error) {
	if path == "" || strings.ContainsRune(path, '?') {
		// The driver splits the DSN at the first '?'.
		return nil, fmt.Errorf("storage: invalid database path %q", path)
	}
	if dir := filepath.Dir(path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return nil, fmt.Errorf("storage: create database directory: %w", err)
		}
	}

	w, err := sql.Open("sqlite", path+"?"+writerDSN)
	if err != nil {
		return nil, fmt.Errorf("storage: open writer: %w", err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)

	// Migrate before opening readers: the writer switches the file to WAL.
	if err := migrate(ctx, w, sqliteDialect); err != nil {
		w.Close()
		return nil, err
	}
	// Planner statistics, so that e.g. "parent_node IS NULL" on a table
	// where that is every row is not taken for a selective filter. Cheap:
	// SQLite only analyzes when its heuristics say it is worth it.
	if _, err := w.ExecContext(ctx, "PRAGMA optimize=0x10002"); err != nil {
		w.Close()
		return nil, fmt.Errorf("storage: optimize: %w", err)
	}

	r, err := openReaders(ctx, path, readerConns)
	if err != nil {
		w.Close()
		return nil, err
	}
	fg, err := openReaders(ctx, path, foregroundConns)
	if err != nil {
		w.Close()
		r.Close()
		return nil, err
	}
	rp := newPool(r, sqliteDialect)
	rp.foreground = newPool(fg, sqliteDialect)

	s := &DB{
		w:     newPool(w, sqliteDialect),
		r:     rp,
		nodes: newNodeSQL(),
		ports: newPortSQL(),
		conds: newConductorSQL(),
		hist:  newEventSQL(),
	}
	// Statements that run inside write transactions are prepared now: a
	// transaction holds the only writer connection and cannot prepare
	// through the pool (writeTx prepares the others after commit).
	for _, q := range []string{s.nodes.byUUID, s.nodes.byName, s.ports.byUUID, s.hist.insert} {
		if s.w.prepare(ctx, q) == nil {
			s.Close()
			return nil, fmt.Errorf("storage: prepare %q failed", q)
		}
	}
	if s.dataVer, err = openDataVersion(ctx, path); err != nil {
		s.Close()
		return nil, err
	}
	s.commits = startCommitter(s.w)
	return s, nil
}

// openReaders opens a pool of n query_only connections to path.
func openReaders(ctx context.Context, path string, n int) (*sql.DB, error) {
	r, err := sql.Open("sqlite", path+"?"+readerDSN)
	if err != nil {
		return nil, fmt.Errorf("storage: open readers: %w", err)
	}
	r.SetMaxOpenConns(n)
	// Keep readers open: opening a connection re-runs the pragmas.
	r.SetMaxIdleConns(n)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	if err := r.PingContext(ctx); err != nil {
		r.Close()
		return nil, fmt.Errorf("storage: open readers: %w", err)
	}
	return r, nil
}

// Close closes both pools, on SQLite first letting it refresh its planner
// statistics as its documentation recommends for long-lived connections.
func (s *DB) Close() error {
	var err error
	s.stats.close()
	if s.commits != nil {
		s.commits.stop()
		_, err = s.w.db.ExecContext(context.Background(), "PRAGMA optimize")
	}
	return errors.Join(err, s.dataVer.close(), s.r.close(), s.w.close())
}
