package storage

import (
	"context"
	"database/sql"
	"path/filepath"
	"reflect"
	"testing"
)

// TestSchemaSameOnBothDialects: the one set of migrations gives SQLite and
// PostgreSQL the same tables, columns (with nullability) and indexes.
func TestSchemaSameOnBothDialects(t *testing.T) {
	if !onPostgres() {
		t.Skip("compares against PostgreSQL: runs in the suite's PostgreSQL run")
	}
	ctx := context.Background()
	lite, err := Open(ctx, filepath.Join(t.TempDir(), "schema.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer lite.Close()
	pg := openTest(t)

	type col struct {
		Table, Name string
		NotNull     bool
	}
	columns := func(s *DB, q string) []col {
		return mustQueryAll(t, s, func(rows *sql.Rows, c *col) error { return rows.Scan(&c.Table, &c.Name, &c.NotNull) }, q)
	}
	liteCols := columns(lite, `SELECT m.name, p.name, p."notnull" OR p.pk FROM sqlite_master m, pragma_table_info(m.name) p
		WHERE m.type = 'table' AND m.name NOT LIKE 'sqlite_%' ORDER BY m.name, p.name`)
	pgCols := columns(pg, `SELECT table_name, column_name, is_nullable = 'NO' FROM information_schema.columns
		WHERE table_schema = 'public' ORDER BY table_name COLLATE "C", column_name COLLATE "C"`)
	if len(liteCols) == 0 || !reflect.DeepEqual(liteCols, pgCols) {
		t.Fatalf("columns differ:\nsqlite   %v\npostgres %v", liteCols, pgCols)
	}

	names := func(s *DB, q string) []string { return mustQueryAll(t, s, scanOne[string], q) }
	// Indexes made by CREATE INDEX (the ones UNIQUE makes are named by each
	// database its own way; the unique constraints are tested by the suite).
	liteIdx := names(lite, `SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL ORDER BY name`)
	pgIdx := names(pg, `SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexname LIKE '%\_idx' ESCAPE '\' ORDER BY indexname COLLATE "C"`)
	if len(liteIdx) == 0 || !reflect.DeepEqual(liteIdx, pgIdx) {
		t.Fatalf("indexes differ:\nsqlite   %v\npostgres %v", liteIdx, pgIdx)
	}
	// Partial indexes stay partial.
	partial := names(pg, `SELECT indexname FROM pg_indexes WHERE schemaname = 'public' AND indexdef LIKE '%WHERE%' ORDER BY indexname COLLATE "C"`)
	litePartial := names(lite, `SELECT name FROM sqlite_master WHERE type = 'index' AND sql LIKE '%WHERE%' ORDER BY name`)
	if len(partial) == 0 || !reflect.DeepEqual(partial, litePartial) {
		t.Fatalf("partial indexes differ:\nsqlite   %v\npostgres %v", litePartial, partial)
	}
}

// mustQueryAll reads every row of q on s's readers through scan.
func mustQueryAll[T any](t *testing.T, s *DB, scan func(*sql.Rows, *T) error, q string) []T {
	t.Helper()
	out, err := queryAll(context.Background(), s.reader(), nil, "query", scan, q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
