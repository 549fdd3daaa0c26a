package pgtest

import (
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
)

// Environment of a suite's PostgreSQL run (see RunBoth).
const (
	envBackend = "CASTIRON_TEST_BACKEND"
	envSocket  = "CASTIRON_TEST_PG_SOCKET"
)

// Postgres reports whether this test process is a suite's PostgreSQL run,
// and then the server it runs against.
func Postgres() (*Server, bool) {
	if os.Getenv(envBackend) != "postgres" {
		return nil, false
	}
	return suiteServer(), true
}

// suiteServer is the one handle of this process on the suite's server, so
// that the database names it hands out never repeat.
var suiteServer = sync.OnceValue(func() *Server { return &Server{Socket: os.Getenv(envSocket)} })

// RunBoth runs a package's whole test suite twice: on SQLite (this process),
// then on PostgreSQL (this test binary again, with the same flags, against a
// server started here for it). Tests ask Postgres which run they are in.
// Use it as TestMain: os.Exit(pgtest.RunBoth(m)).
//
// The server runs with fsync and synchronous_commit off (speed; nothing
// of a test outlives it): the suite must open its databases with
// storage.Config{NonDurableTest: true}, which castiron otherwise refuses.
func RunBoth(m *testing.M) int {
	if _, child := Postgres(); child {
		return m.Run()
	}
	code := m.Run()
	srv, err := Start("fsync=off", "synchronous_commit=off", "full_page_writes=off")
	if err != nil {
		fmt.Printf("pgtest: the suite did not run on PostgreSQL: %v\n", err)
		if os.Getenv("CI") == "true" {
			return 1
		}
		return code
	}
	defer srv.Stop()
	fmt.Println("pgtest: the same suite on PostgreSQL")
	cmd := exec.Command(os.Args[0], os.Args[1:]...)
	cmd.Env = append(os.Environ(), envBackend+"=postgres", envSocket+"="+srv.Socket)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Printf("pgtest: PostgreSQL run: %v\n", err)
		return 1
	}
	return code
}
