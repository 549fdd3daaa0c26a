package storage

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

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

// migrationLock is the PostgreSQL advisory lock that serialises conductors
// starting at once on one database (SQLite's writer lock does it there).
const migrationLock = 0x63617374 // "cast"

// migrate applies, in version order, every embedded migration that
// schema_migrations does not list. All pending migrations go in one
// transaction together with their schema_migrations rows, so a crash leaves
// either all or none of them (a new database takes one commit, not one per
// migration); an up-to-date database costs one read.
func migrate(ctx context.Context, db *sql.DB, d *dialect) error {
	ms, err := loadMigrations()
	if err != nil {
		return err
	}
	w, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	defer w.Close()
	if d.postgres {
		if _, err := w.ExecContext(ctx, "SELECT pg_advisory_lock($1)", migrationLock); err != nil {
			return fmt.Errorf("storage: migrate: %w", err)
		}
		defer w.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", migrationLock)
	}
	if _, err := w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT NOT NULL,
		applied_at TEXT NOT NULL
	)`); err != nil {
		return fmt.Errorf("storage: create schema_migrations: %w", err)
	}
	applied, err := appliedMigrations(ctx, w)
	if err != nil {
		return err
	}
	if len(pendingMigrations(ms, applied)) == 0 {
		return nil
	}
	return applyMigrations(ctx, w, d, ms)
}

// appliedMigrations reads the versions schema_migrations lists (q is the
// connection or a transaction on it).
func appliedMigrations(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) (map[int]bool, error) {
	rows, err := q.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return nil, fmt.Errorf("storage: read schema_migrations: %w", err)
	}
	defer rows.Close()
	applied := map[int]bool{}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("storage: read schema_migrations: %w", err)
		}
		applied[v] = true
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("storage: read schema_migrations: %w", err)
	}
	return applied, nil
}

func pendingMigrations(ms []migration, applied map[int]bool) []migration {
	var out []migration
	for _, m := range ms {
		if !applied[m.version] {
			out = append(out, m)
		}
	}
	return out
}

// applyMigrations runs the pending ones of ms in one transaction.
func applyMigrations(ctx context.Context, w *sql.Conn, d *dialect, ms []migration) error {
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	defer tx.Rollback()
	// Read again inside the write transaction: another process opening the
	// same file may have applied some meanwhile.
	applied, err := appliedMigrations(ctx, tx)
	if err != nil {
		return err
	}
	for _, m := range pendingMigrations(ms, applied) {
		if _, err := tx.ExecContext(ctx, d.schema(m.sql)); err != nil {
			return fmt.Errorf("storage: migration %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, d.bind(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`),
			m.version, m.name, formatTime(time.Now())); err != nil {
			return fmt.Errorf("storage: migration %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("storage: migrate: %w", err)
	}
	return nil
}
