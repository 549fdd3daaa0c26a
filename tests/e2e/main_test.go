//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"testing"
)

// suite is what outlives one test: the castiron binary built once, and the
// labs alive right now, so that an interrupt (^C, SIGTERM) still stops their
// VMs and deletes their namespaces. t.Cleanup does not run when the test
// binary is killed by a signal.
type suite struct {
	dir string // shared temp dir (the built binary)

	buildOnce sync.Once
	binary    string
	buildErr  error

	mu   sync.Mutex
	labs map[*Lab]struct{}
}

var shared = &suite{labs: map[*Lab]struct{}{}}

func registerLab(l *Lab) {
	shared.mu.Lock()
	shared.labs[l] = struct{}{}
	shared.mu.Unlock()
}

func unregisterLab(l *Lab) {
	shared.mu.Lock()
	delete(shared.labs, l)
	shared.mu.Unlock()
}

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "e2e-suite-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared.dir = dir

	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	stopSignals := make(chan struct{})
	go func() {
		select {
		case s := <-sigs:
			fmt.Fprintf(os.Stderr, "e2e: %v: tearing down the running labs\n", s)
			shared.mu.Lock()
			labs := make([]*Lab, 0, len(shared.labs))
			for l := range shared.labs {
				labs = append(labs, l)
			}
			shared.mu.Unlock()
			for _, l := range labs {
				l.teardown()
			}
			os.RemoveAll(dir)
			os.Exit(2)
		case <-stopSignals:
		}
	}()

	code := m.Run()
	close(stopSignals)
	signal.Stop(sigs)
	os.RemoveAll(dir)
	os.Exit(code)
}
