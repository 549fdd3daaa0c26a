package scaleout

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"castiron/storage/pgtest"
	"castiron/tests/crashtest"
)

// TestPostgresFailover (issue 26, item 4, the failover half): three
// conductors on a PostgreSQL primary with a synchronous streaming standby,
// reaching the database through libpq's host list (primary, standby) with
// target_session_attrs=read-write. In the middle of a write burst the
// primary dies (immediate shutdown, as a crash) and the standby is promoted
// a second later; the old primary never comes back. Checked as for a
// restart: only successes and clean 503s, the same conductor processes
// carry on against the new primary by themselves, every acknowledged
// create is there, nothing stays reserved, the ring recovers. Synchronous
// replication is what makes "acknowledged" survive the failover
// (docs/durability.md); with an asynchronous standby the last commits
// before the crash can be lost, which no client of any database can undo.
func TestPostgresFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary, runs two PostgreSQL servers and three conductors")
	}
	pg := pgtest.New(t)
	db := pg.Database(t)
	standby, err := pgtest.StartReplica(pg)
	if err != nil {
		pgtest.Skip(t, err)
	}
	t.Cleanup(standby.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pg.SetSynchronousStandby(ctx); err != nil {
		t.Fatal(err)
	}
	url := pgtest.FailoverURL(pg, standby, pgtest.DatabaseName(db))
	tmp := t.TempDir()
	bin := crashtest.Build(t, tmp)
	names := []string{"c1", "c2", "c3"}
	srv := map[string]*crashtest.Server{}
	pids := map[string]int{}
	for _, n := range names {
		dir := filepath.Join(tmp, n)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		srv[n] = crashtest.Start(t, bin, dir, tmp, "--database", url, "--conductor-name", n,
			"--heartbeat-interval", "1s", "--heartbeat-timeout", "5s")
		pids[n] = srv[n].PID
	}
	ringAgreed(t, srv, names, "before the burst")

	r := burst(t, srv, names, "failover", func() error {
		if err := pg.Shutdown("immediate"); err != nil {
			return err
		}
		time.Sleep(time.Second) // the time a failover manager takes to decide
		return standby.Promote()
	})
	t.Logf("failover: primary crashed, standby promoted after %s; %s", r.down.Round(time.Millisecond), r.summary())
	for _, p := range r.bad {
		t.Errorf("failover: unclean answer: %s", p)
	}
	for _, n := range names {
		for _, l := range srv[n].LogLines(`msg="internal error"`) {
			t.Errorf("failover: %s logged: %s", n, l)
		}
	}
	if t.Failed() {
		return
	}
	for _, n := range names {
		if !srv[n].Alive() || srv[n].PID != pids[n] {
			t.Fatalf("failover: conductor %s exited (pid %d)", n, pids[n])
		}
	}
	ringAgreed(t, srv, names, "after the failover")
	settled(t, srv["c1"], "failover", r)
}
