package storage

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"castiron/storage/pgtest"
)

// The whole suite runs twice: on SQLite, then on PostgreSQL (pgtest.RunBoth).
func TestMain(m *testing.M) { os.Exit(pgtest.RunBoth(m)) }

// onPostgres reports whether this run of the suite is the PostgreSQL one.
func onPostgres() bool {
	_, ok := pgtest.Postgres()
	return ok
}

// testDatabase names a fresh, empty database for one test: a SQLite file in
// a directory that does not exist yet (Open must create it), or a new
// database on the suite's PostgreSQL server.
func testDatabase(tb testing.TB) string {
	tb.Helper()
	if srv, ok := pgtest.Postgres(); ok {
		return srv.Database(tb)
	}
	return filepath.Join(tb.TempDir(), "sub", "dir", "castiron.db")
}

// openTest opens a store on a fresh database.
func openTest(tb testing.TB) *DB {
	tb.Helper()
	return openAt(tb, testDatabase(tb))
}

// openAt opens a store on database; it is closed when the test ends.
func openAt(tb testing.TB, database string) *DB {
	tb.Helper()
	// The suite's PostgreSQL server runs with fsync off (pgtest.RunBoth).
	s, err := OpenDatabaseWith(context.Background(), database, Config{NonDurableTest: true})
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// reopen closes s, which must succeed, and opens database again, as a
// restart of castiron would.
func reopen(tb testing.TB, s *DB, database string) *DB {
	tb.Helper()
	if err := s.Close(); err != nil {
		tb.Fatal(err)
	}
	return openAt(tb, database)
}
