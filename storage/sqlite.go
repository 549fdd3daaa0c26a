package storage

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// SQLite is the embedded Store. All writes go through one connection (SQLite
// allows one writer at a time anyway; queueing in database/sql is cheaper than
// SQLITE_BUSY retries), reads through a small pool of query_only connections
// that WAL lets run beside the writer.
//
// Queries use `?` placeholders; a PostgreSQL store would rebind them to $n.
type SQLite struct {
	w *pool // writer: one connection, BEGIN IMMEDIATE
	r *pool // readers: query_only

	nodes nodeSQL
	ports portSQL
	conds conductorSQL
	hist  eventSQL

	commits *committer // group commit of write transactions
}

var _ Store = (*SQLite)(nil)

//go:embed migrations/*.sql
var migrationFS embed.FS

const (
	readerConns = 4
	// Each pragma is set per connection by the driver when it opens one.
	writerDSN = "_pragma=busy_timeout(5000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_pragma=foreign_keys(1)&_txlock=immediate"
	readerDSN = "_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)&_pragma=query_only(1)"
)

// Open opens (creating if needed) the database at path, applies pending
// migrations and returns the store.
func Open(ctx context.Context, path string) (*SQLite, error) {
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
	if err := migrate(ctx, w); err != nil {
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

	r, err := sql.Open("sqlite", path+"?"+readerDSN)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("storage: open readers: %w", err)
	}
	r.SetMaxOpenConns(readerConns)
	// Keep readers open: opening a connection re-runs the pragmas.
	r.SetMaxIdleConns(readerConns)
	r.SetConnMaxLifetime(0)
	r.SetConnMaxIdleTime(0)
	if err := r.PingContext(ctx); err != nil {
		w.Close()
		r.Close()
		return nil, fmt.Errorf("storage: open readers: %w", err)
	}

	s := &SQLite{
		w:     newPool(w),
		r:     newPool(r),
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
	s.commits = startCommitter(s.w)
	return s, nil
}

// Close closes both pools, first letting SQLite refresh its planner
// statistics as its documentation recommends for long-lived connections.
func (s *SQLite) Close() error {
	if s.commits != nil {
		s.commits.stop()
	}
	_, err := s.w.db.ExecContext(context.Background(), "PRAGMA optimize")
	return errors.Join(err, s.r.close(), s.w.close())
}

// migration is one embedded schema file, "NNNN_description.sql".
type migration struct {
	version int
	name    string
	sql     string
}

func loadMigrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []migration
	seen := map[int]string{}
	for _, e := range entries {
		name := e.Name()
		prefix, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(prefix)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("storage: migration %s: name must start with a positive version number", name)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("storage: migrations %s and %s share version %d", prev, name, v)
		}
		seen[v] = name
		body, err := migrationFS.ReadFile("migrations/" + name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	return ms, nil
}

// migrate applies, in version order, every embedded migration that
// schema_migrations does not list, each in its own transaction together with
// its schema_migrations row, so a crash leaves either all or none of it.
func migrate(ctx context.Context, w *sql.DB) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	if _, err := w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return fmt.Errorf("storage: create schema_migrations: %w", err)
	}
	for _, m := range ms {
		if err := applyMigration(ctx, w, m); err != nil {
			return err
		}
	}
	return nil
}

func applyMigration(ctx context.Context, w *sql.DB, m migration) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storage: migration %s: %w", m.name, err)
	}
	defer tx.Rollback()
	// Checked inside the write transaction: another process opening the
	// same file may have applied it meanwhile.
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&n); err != nil {
		return fmt.Errorf("storage: migration %s: %w", m.name, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("storage: migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, formatTime(time.Now())); err != nil {
		return fmt.Errorf("storage: migration %s: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("storage: migration %s: %w", m.name, err)
	}
	return nil
}
