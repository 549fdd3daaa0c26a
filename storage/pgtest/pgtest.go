// Package pgtest starts throwaway PostgreSQL servers for tests, from the
// binaries of Debian's postgresql package: initdb and pg_ctl in a temporary
// directory, listening on a unix socket only (nothing on the network), run
// as the postgres (or nobody) user when the tests run as root. Without the
// binaries tests skip, except under CI=true where they fail.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // registers the "pgx" driver
)

// Server is one running PostgreSQL cluster.
type Server struct {
	dir    string // data directory and socket directory live here
	bin    string
	runAs  *user.User // nil: as ourselves
	Socket string     // the directory of the unix socket
	next   atomic.Int64
	opts   string // the server options it was started with (Restart)
}

// Bin finds the directory of initdb and pg_ctl: $PG_BIN, else the newest
// /usr/lib/postgresql/<version>/bin.
func Bin() (string, error) {
	if b := os.Getenv("PG_BIN"); b != "" {
		return b, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (Debian package postgresql)")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// Skip skips tb (or fails it under CI=true) when no server can be started.
func Skip(tb testing.TB, err error) {
	tb.Helper()
	if os.Getenv("CI") == "true" {
		tb.Fatalf("PostgreSQL: %v", err)
	}
	tb.Skipf("PostgreSQL: %v", err)
}

// Start initialises and starts a cluster in a new temporary directory.
// settings are extra "name=value" server settings (e.g. fsync=off: then
// castiron's store opens its databases only with storage.Config's
// NonDurableTest).
func Start(settings ...string) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "castiron-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin, Socket: dir}
	if os.Geteuid() == 0 {
		// PostgreSQL refuses to run as root.
		for _, name := range []string{"postgres", "nobody"} {
			if u, err := user.Lookup(name); err == nil {
				s.runAs = u
				break
			}
		}
		if s.runAs == nil {
			os.RemoveAll(dir)
			return nil, errors.New("running as root and no postgres or nobody user to run the server as")
		}
		uid, _ := strconv.Atoi(s.runAs.Uid)
		gid, _ := strconv.Atoi(s.runAs.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("initdb", "-D", data, "-U", "castiron", "--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	opts := []string{"-k " + dir, "-c listen_addresses=''", "-c max_connections=300", "-c shared_buffers=64MB"}
	for _, kv := range settings {
		opts = append(opts, "-c "+kv)
	}
	s.opts = strings.Join(opts, " ")
	if out, err := s.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-o", s.opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start: %v: %s %s", err, out, log)
	}
	return s, nil
}

func (s *Server) run(tool string, args ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(s.bin, tool), args...)
	cmd.Dir = s.dir
	if s.runAs != nil {
		cmd = exec.Command("setpriv", append([]string{"--reuid=" + s.runAs.Uid, "--regid=" + s.runAs.Gid, "--clear-groups",
			filepath.Join(s.bin, tool)}, args...)...)
		cmd.Dir = s.dir
	}
	return cmd.CombinedOutput()
}

// URL is the postgres:// URL of database db on this server.
func (s *Server) URL(db string) string {
	return "postgres://castiron@/" + db + "?host=" + s.Socket + "&sslmode=disable"
}

// NewDatabase creates an empty database and returns its URL.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.next.Add(1))
	admin, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer admin.Close()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database: %w", err)
	}
	return s.URL(name), nil
}

// Stop stops the server (fast shutdown) and removes its directory.
func (s *Server) Stop() {
	s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "fast", "-w", "-t", "30", "stop")
	os.RemoveAll(s.dir)
}

// Kill stops the server at once (immediate shutdown), as a crash would.
func (s *Server) Kill() {
	s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", "immediate", "-w", "-t", "30", "stop")
}

// Shutdown stops the server with pg_ctl's mode ("smart", "fast":
// disconnect clients and checkpoint; "immediate": quit without a
// checkpoint, as a crash would) and keeps its data for Restart.
func (s *Server) Shutdown(mode string) error {
	if out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-m", mode, "-w", "-t", "30", "stop"); err != nil {
		return fmt.Errorf("pg_ctl stop -m %s: %v: %s", mode, err, out)
	}
	return nil
}

// Restart starts the server again on its data (after Kill: crash
// recovery), with the settings it was started with.
func (s *Server) Restart() error {
	if out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-l", filepath.Join(s.dir, "log"), "-w", "-t", "60", "-o", s.opts, "start"); err != nil {
		return fmt.Errorf("pg_ctl start: %v: %s", err, out)
	}
	return nil
}

// New starts a server for one test and stops it when the test ends.
func New(tb testing.TB, settings ...string) *Server {
	tb.Helper()
	s, err := Start(settings...)
	if err != nil {
		Skip(tb, err)
	}
	tb.Cleanup(s.Stop)
	return s
}

// Database is NewDatabase for a test.
func (s *Server) Database(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	u, err := s.NewDatabase(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	return u
}

// StartReplica makes a streaming standby of primary (pg_basebackup -R over
// primary's socket) in a new temporary directory and starts it; it serves
// reads only until Promote. Durable failover needs the primary to wait for
// it (SetSynchronousStandby): otherwise the last commits acknowledged by
// the primary may never reach it.
func StartReplica(primary *Server) (*Server, error) {
	dir, err := os.MkdirTemp("", "castiron-pg-replica-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: primary.bin, Socket: dir, runAs: primary.runAs}
	if s.runAs != nil {
		uid, _ := strconv.Atoi(s.runAs.Uid)
		gid, _ := strconv.Atoi(s.runAs.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	data := filepath.Join(dir, "data")
	if out, err := s.run("pg_basebackup", "-h", primary.Socket, "-U", "castiron", "-D", data, "-R", "-X", "stream", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_basebackup: %v: %s", err, out)
	}
	s.opts = strings.Replace(primary.opts, "-k "+primary.Socket, "-k "+dir, 1) + " -c cluster_name=replica"
	if out, err := s.run("pg_ctl", "-D", data, "-l", filepath.Join(dir, "log"), "-w", "-t", "60", "-o", s.opts, "start"); err != nil {
		log, _ := os.ReadFile(filepath.Join(dir, "log"))
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pg_ctl start (replica): %v: %s %s", err, out, log)
	}
	return s, nil
}

// SetSynchronousStandby makes every commit on s wait until a standby has
// flushed it (synchronous_standby_names = '*'), so that a failover to that
// standby loses nothing acknowledged.
func (s *Server) SetSynchronousStandby(ctx context.Context) error {
	db, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "ALTER SYSTEM SET synchronous_standby_names = '*'"); err != nil {
		return err
	}
	_, err = db.ExecContext(ctx, "SELECT pg_reload_conf()")
	return err
}

// Promote turns a standby into a primary (pg_ctl promote, waiting for it).
func (s *Server) Promote() error {
	if out, err := s.run("pg_ctl", "-D", filepath.Join(s.dir, "data"), "-w", "-t", "60", "promote"); err != nil {
		return fmt.Errorf("pg_ctl promote: %v: %s", err, out)
	}
	return nil
}

// FailoverURL is the URL of database db on primary, falling back to
// standby: libpq's (and pgx's) host list with target_session_attrs
// read-write, so connections go to whichever of the two accepts writes.
func FailoverURL(primary, standby *Server, db string) string {
	return "postgres://castiron@/" + db + "?host=" + primary.Socket + "," + standby.Socket +
		"&sslmode=disable&target_session_attrs=read-write"
}

// DatabaseName is the name in a URL from NewDatabase.
func DatabaseName(url string) string {
	rest := strings.TrimPrefix(url, "postgres://castiron@/")
	name, _, _ := strings.Cut(rest, "?")
	return name
}
