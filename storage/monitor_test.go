package storage

import (
	"context"
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCheckWritable: the check commits a write (another connection sees
// the database change: PRAGMA data_version) and fails,
// naming the cause, while another process holds the write lock.
func TestCheckWritable(t *testing.T) {
	ctx := context.Background()
	if onPostgres() {
		checkWritablePostgres(t)
		return
	}
	path := filepath.Join(t.TempDir(), "castiron.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	other, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	conn, err := other.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dataVersion := func() (v int64) {
		if err := conn.QueryRowContext(ctx, "PRAGMA data_version").Scan(&v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	before := dataVersion()
	if err := s.CheckWritable(ctx, "c1"); err != nil {
		t.Fatalf("CheckWritable: %v", err)
	}
	if after := dataVersion(); after == before {
		t.Errorf("data_version stayed %d: the check committed nothing", before)
	}
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	err = s.CheckWritable(ctx, "c1") // waits busy_timeout (5 s), then fails
	if err == nil || !strings.Contains(err.Error(), "locked") {
		t.Errorf("CheckWritable while another writer holds the lock: %v", err)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	if err := s.CheckWritable(ctx, "c1"); err != nil {
		t.Errorf("CheckWritable after the lock is released: %v", err)
	}
}

// checkWritablePostgres: on PostgreSQL the check commits a row another
// session sees, each time with the time of that check.
func checkWritablePostgres(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	var seen []string
	for i := 0; i < 2; i++ {
		if err := s.CheckWritable(ctx, "c1"); err != nil {
			t.Fatalf("CheckWritable: %v", err)
		}
		var at string
		if err := s.reader().queryRow(ctx, "SELECT checked_at FROM write_checks WHERE conductor = ?", "c1").Scan(&at); err != nil {
			t.Fatal(err)
		}
		seen = append(seen, at)
		time.Sleep(2 * time.Millisecond)
	}
	if seen[0] == seen[1] {
		t.Errorf("checked_at stayed %s: the second check committed nothing", seen[0])
	}
}
