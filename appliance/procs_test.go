package appliance

import (
	"log/slog"
	"runtime"
	"testing"
)

// TestEnsureProcs: one P is raised to two; more are left alone; a
// GOMAXPROCS the operator set wins.
func TestEnsureProcs(t *testing.T) {
	prev := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.GOMAXPROCS(prev) })
	quiet := slog.New(slog.DiscardHandler)
	env := func(v string) func(string) string { return func(string) string { return v } }

	runtime.GOMAXPROCS(1)
	if got := ensureProcs(env(""), quiet); got != 2 || runtime.GOMAXPROCS(0) != 2 {
		t.Errorf("one P: ensureProcs %d, GOMAXPROCS %d; want 2", got, runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(1)
	if got := ensureProcs(env("1"), quiet); got != 1 || runtime.GOMAXPROCS(0) != 1 {
		t.Errorf("GOMAXPROCS=1 set by the operator: ensureProcs %d, GOMAXPROCS %d; want 1", got, runtime.GOMAXPROCS(0))
	}
	runtime.GOMAXPROCS(4)
	if got := ensureProcs(env(""), quiet); got != 4 {
		t.Errorf("four Ps: ensureProcs %d, want 4", got)
	}
}
