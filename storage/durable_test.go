package storage

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"
	"time"

	"castiron/fault"
	"castiron/storage/pgtest"
)

// TestPostgresRefusesFsyncOff: the suite's PostgreSQL server runs with
// fsync off; castiron opens it only with the test option.
func TestPostgresRefusesFsyncOff(t *testing.T) {
	srv, ok := pgtest.Postgres()
	if !ok {
		t.Skip("runs in the PostgreSQL run of the suite (its server has fsync off)")
	}
	ctx := context.Background()
	db := srv.Database(t)
	s, err := OpenDatabase(ctx, db)
	var nd *NonDurableError
	if !errors.As(err, &nd) || nd.Setting != "fsync" || nd.Value != "off" {
		if s != nil {
			s.Close()
		}
		t.Fatalf("OpenDatabase on a server with fsync off: %v, want a NonDurableError about fsync", err)
	}
	if !strings.Contains(err.Error(), "fsync = off") {
		t.Errorf("the message does not name the setting: %q", err)
	}
	s, err = OpenDatabaseWith(ctx, db, Config{NonDurableTest: true})
	if err != nil {
		t.Fatalf("with the test option: %v", err)
	}
	s.Close()
}

// TestPostgresDurableSettings: a server with PostgreSQL's defaults opens;
// synchronous_commit off for castiron's sessions (here set on its
// database) is refused, the test option lets it through.
func TestPostgresDurableSettings(t *testing.T) {
	if onPostgres() {
		t.Skip("starts a server of its own: runs in the SQLite run of the suite")
	}
	srv := pgtest.New(t)
	ctx := context.Background()
	db := srv.Database(t)
	s, err := OpenDatabase(ctx, db)
	if err != nil {
		t.Fatalf("OpenDatabase on a server with the default settings: %v", err)
	}
	s.Close()

	admin, err := sql.Open("pgx", db)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	var name string
	if err := admin.QueryRowContext(ctx, "SELECT current_database()").Scan(&name); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.ExecContext(ctx, "ALTER DATABASE "+name+" SET synchronous_commit = off"); err != nil {
		t.Fatal(err)
	}
	s, err = OpenDatabase(ctx, db)
	var nd *NonDurableError
	if !errors.As(err, &nd) || nd.Setting != "synchronous_commit" {
		if s != nil {
			s.Close()
		}
		t.Fatalf("OpenDatabase with synchronous_commit off: %v, want a NonDurableError about synchronous_commit", err)
	}
	s, err = OpenDatabaseWith(ctx, db, Config{NonDurableTest: true})
	if err != nil {
		t.Fatalf("with the test option: %v", err)
	}
	s.Close()
}

// TestPostgresRestart: while the server is down a write fails with
// fault.Unavailable (503, retried by clients), never as an internal
// error; once it is back the pool reconnects by itself and nothing
// committed before is lost.
func TestPostgresRestart(t *testing.T) {
	if onPostgres() {
		t.Skip("starts a server of its own: runs in the SQLite run of the suite")
	}
	srv := pgtest.New(t)
	ctx := context.Background()
	s := openAt(t, srv.Database(t))
	before := mustCreateNode(t, s, newNode("before"))
	srv.Kill()
	err := s.CreateNode(ctx, newNode("during"))
	if !fault.Is(err, fault.Unavailable) {
		t.Fatalf("create with the server down: %v (%T), want a fault.Unavailable", err, err)
	}
	// Reads are not classified here (they return the driver's error, as
	// every read does) but must be recognisable as such: engine.Word
	// answers them 503 through Unreachable.
	if _, err := s.GetNode(ctx, before.UUID); err == nil || !Unreachable(err) {
		t.Fatalf("read with the server down: %v (%T), want an error Unreachable reports", err, err)
	}
	if _, err := s.GetNode(ctx, "no-such-node"); !Unreachable(err) {
		t.Fatalf("read of a missing node with the server down: %v, want an error Unreachable reports", err)
	}
	// A background task's write waits for the server instead (a task
	// that cannot record its end would leave its node reserved).
	waited := make(chan error, 1)
	go func() {
		wctx, cancel := context.WithTimeout(RetryOutages(ctx), time.Minute)
		defer cancel()
		waited <- s.CreateNode(wctx, newNode("waited"))
	}()
	time.Sleep(500 * time.Millisecond)
	select {
	case err := <-waited:
		t.Fatalf("a RetryOutages write ended while the server was down: %v", err)
	default:
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	if err := <-waited; err != nil {
		t.Errorf("a RetryOutages write after the restart: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err = s.CreateNode(ctx, newNode("after"))
		if err == nil {
			break
		}
		if !fault.Is(err, fault.Unavailable) || time.Now().After(deadline) {
			t.Fatalf("create after the restart: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.GetNode(ctx, before.UUID); err != nil {
		t.Errorf("node committed before the crash: %v", err)
	}
}
