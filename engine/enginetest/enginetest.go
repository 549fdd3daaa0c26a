// Package enginetest starts a real conductor for the tests of the packages
// built on engine (httpapi, its client workflows, the web UI): engine over
// a SQLite file in the test's temporary directory, with the hardware types
// the test names, stopped when the test ends.
package enginetest

import (
	"context"
	"log/slog"
	"path/filepath"
	"testing"

	"castiron/engine"
	"castiron/storage"
)

// Quiet is a logger that writes nothing.
func Quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// Start opens a new store and starts a conductor over it with hw and cfg
// (a quiet logger when cfg names none). When the test ends the conductor
// stops (an error stopping it fails the test) and the store closes;
// cleanups the test registered after Start run before that.
func Start(t testing.TB, cfg engine.Config, hw ...*engine.HardwareType) (*engine.Conductor, *storage.SQLite) {
	t.Helper()
	return StartAt(t, filepath.Join(t.TempDir(), "castiron.db"), cfg, hw...)
}

// StartAt is Start over the SQLite file at path (a test that opens a
// second store on it names it), or over a PostgreSQL database when path is
// its URL (storage.OpenDatabase). A PostgreSQL database is opened with the
// test option: test servers (storage/pgtest) may run with fsync off.
func StartAt(t testing.TB, path string, cfg engine.Config, hw ...*engine.HardwareType) (*engine.Conductor, *storage.SQLite) {
	t.Helper()
	ctx := context.Background()
	st, err := storage.OpenDatabaseWith(ctx, path, storage.Config{NonDurableTest: true})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Logger == nil {
		cfg.Logger = Quiet()
	}
	cond := engine.New(st, engine.NewRegistry(hw...), cfg)
	if err := cond.Start(ctx); err != nil {
		st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cond.Stop(context.Background()); err != nil {
			t.Error(err)
		}
		st.Close()
	})
	return cond, st
}
