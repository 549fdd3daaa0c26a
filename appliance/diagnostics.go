package appliance

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"runtime"
	"runtime/debug"
	"time"
)

// setMemoryLimit applies --memory-limit-mib as the Go runtime's soft memory
// limit (GOMEMLIMIT): the collector works harder as the heap nears it
// instead of letting it double after each collection. 0 leaves the runtime's
// setting (GOMEMLIMIT from the environment, else none).
func setMemoryLimit(mib int, log *slog.Logger) {
	if mib <= 0 {
		return
	}
	debug.SetMemoryLimit(int64(mib) << 20)
	log.Info("memory limit", "mib", mib)
}

// minProcs is the fewest Ps (GOMAXPROCS) castiron runs with.
const minProcs = 2

// ensureProcs raises GOMAXPROCS to minProcs when the runtime chose fewer
// (one CPU, or a container quota of one) and the operator did not set
// GOMAXPROCS. With a single P every ready goroutine of the conductor (a
// storm's heartbeats, BMC calls, the group commit) queues ahead of the
// API's: pinned to one CPU in a 1,000-node storm, GET node took 45 ms at
// the median and 300-430 ms at p99 with one P, 9 and 80 ms with two, on
// the same CPU time (bench/results/2026-11-28-storm-profile.md). A second
// P costs nothing when idle. It returns the value in force.
func ensureProcs(getenv func(string) string, log *slog.Logger) int {
	n := runtime.GOMAXPROCS(0)
	if n >= minProcs || getenv("GOMAXPROCS") != "" {
		return n
	}
	runtime.GOMAXPROCS(minProcs)
	log.Info("GOMAXPROCS raised", "from", n, "to", minProcs)
	return minProcs
}

// servePprof serves net/http/pprof on addr (--pprof-listen, loopback
// only: profiles show request data) until ctx ends. The profiles are how
// the figures of docs/measurements.md were explained; off by default.
func servePprof(ctx context.Context, addr string, log *slog.Logger) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return errors.New("--pprof-listen: only a loopback address (profiles show request data)")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	// The block and mutex profiles are empty unless sampled: one in ten
	// contended mutexes, and blocking sampled about once per 100 us blocked
	// (longer waits always). Sampling costs a little on every wait, so only
	// while profiles are served.
	runtime.SetMutexProfileFraction(10)
	runtime.SetBlockProfileRate(int(100 * time.Microsecond))
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	log.Info("pprof serving", "listen", ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
