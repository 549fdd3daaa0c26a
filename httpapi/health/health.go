// Package health serves the liveness and readiness probes of the appliance:
// /healthz answers while the process serves HTTP, /readyz runs the
// readiness checks main wires in (database writable, conductor heartbeating,
// listeners up) and names each failed one with its reason. Both are public
// and say nothing else (no version, no configuration).
package health

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Check is one readiness condition: Run returns nil when it holds, else
// the reason. Run must return by itself in bounded time (the probe stops
// waiting after Timeout, but does not start another run of a check that
// has not returned).
type Check struct {
	Name string
	Run  func(ctx context.Context) error
}

const (
	// Timeout is how long /readyz waits for its checks.
	Timeout = 3 * time.Second
	// cacheFor is how long a result is reused: the probes are public and
	// the database check writes, so a flood costs one write a second.
	cacheFor = time.Second
)

// Probes serves /healthz and /readyz.
type Probes struct {
	checks []*check
	now    func() time.Time

	mu     sync.Mutex
	at     time.Time
	report []Result
}

type check struct {
	Check
	mu      sync.Mutex
	running bool
	done    chan struct{} // closed when the current run ends
	err     error         // outcome of the last finished run
}

// Result is one check's outcome: Err nil when it holds.
type Result struct {
	Name string
	Err  error
}

// New makes the probes over checks, reported in the order given.
func New(checks ...Check) *Probes {
	p := &Probes{now: time.Now}
	for _, c := range checks {
		p.checks = append(p.checks, &check{Check: c})
	}
	return p
}

// Mounts are the probes' patterns for httpapi.Options.Extra.
func (p *Probes) Mounts() map[string]http.Handler {
	return map[string]http.Handler{
		"GET /healthz": http.HandlerFunc(p.Healthz),
		"GET /readyz":  http.HandlerFunc(p.Readyz),
	}
}

// Healthz answers 200 while the process serves requests.
func (p *Probes) Healthz(w http.ResponseWriter, r *http.Request) {
	write(w, http.StatusOK, "ok\n")
}

// Readyz answers 200 when every check holds, else 503; the body lists each
// check as "[+]name ok" or "[-]name failed: reason".
func (p *Probes) Readyz(w http.ResponseWriter, r *http.Request) {
	report := p.Ready(r.Context())
	var b strings.Builder
	status := http.StatusOK
	for _, res := range report {
		if res.Err != nil {
			status = http.StatusServiceUnavailable
			fmt.Fprintf(&b, "[-]%s failed: %v\n", res.Name, res.Err)
		} else {
			fmt.Fprintf(&b, "[+]%s ok\n", res.Name)
		}
	}
	if status == http.StatusOK {
		b.WriteString("ready\n")
	} else {
		b.WriteString("not ready\n")
	}
	write(w, status, b.String())
}

// Ready runs the checks (or reuses a result younger than a second) and
// returns each one's outcome.
func (p *Probes) Ready(ctx context.Context) []Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.report != nil && p.now().Sub(p.at) < cacheFor {
		return p.report
	}
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	for _, c := range p.checks {
		c.start()
	}
	report := make([]Result, len(p.checks))
	for i, c := range p.checks {
		report[i] = Result{Name: c.Name, Err: c.wait(ctx)}
	}
	p.report, p.at = report, p.now()
	return report
}

// start runs the check unless its previous run has not returned yet. The
// run gets its own deadline: it may outlive the request that started it.
func (c *check) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return
	}
	c.running, c.done = true, make(chan struct{})
	done := c.done
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		err := c.Run(ctx)
		c.mu.Lock()
		c.err, c.running = err, false
		c.mu.Unlock()
		close(done)
	}()
}

func (c *check) wait(ctx context.Context) error {
	c.mu.Lock()
	done := c.done
	c.mu.Unlock()
	select {
	case <-done:
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("no answer within %s", Timeout)
	}
}

func write(w http.ResponseWriter, status int, body string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}
