package health

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	srv := httptest.NewServer(h)
	defer srv.Close()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Errorf("Content-Type %q", ct)
	}
	return resp.StatusCode, string(b)
}

func mux(p *Probes) http.Handler {
	m := http.NewServeMux()
	for pattern, h := range p.Mounts() {
		m.Handle(pattern, h)
	}
	return m
}

func TestProbes(t *testing.T) {
	var dbErr atomic.Value
	dbErr.Store(errors.New(""))
	var runs atomic.Int32
	p := New(
		Check{Name: "database", Run: func(context.Context) error {
			runs.Add(1)
			if e := dbErr.Load().(error); e.Error() != "" {
				return e
			}
			return nil
		}},
		Check{Name: "api listener", Run: func(context.Context) error { return nil }},
	)
	clock := time.Unix(1000, 0)
	p.now = func() time.Time { return clock }
	h := mux(p)

	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body := get(t, h, "/readyz")
	if want := "[+]database ok\n[+]api listener ok\nready\n"; code != 200 || body != want {
		t.Errorf("/readyz: %d %q, want 200 %q", code, body, want)
	}
	// Within a second the result is reused: the failure is not seen yet,
	// and the check did not run again.
	dbErr.Store(errors.New("storage: write check: database or disk is full"))
	clock = clock.Add(500 * time.Millisecond)
	if code, _ := get(t, h, "/readyz"); code != 200 || runs.Load() != 1 {
		t.Errorf("cached /readyz: %d after %d runs", code, runs.Load())
	}
	clock = clock.Add(time.Second)
	code, body = get(t, h, "/readyz")
	want := "[-]database failed: storage: write check: database or disk is full\n[+]api listener ok\nnot ready\n"
	if code != 503 || body != want {
		t.Errorf("/readyz: %d %q, want 503 %q", code, body, want)
	}
	if code, _ := get(t, h, "/healthz"); code != 200 {
		t.Errorf("/healthz while not ready: %d (liveness must not follow readiness)", code)
	}
	if code, _ := get(t, h, "/readyz?verbose"); code != 503 {
		t.Errorf("query string changed the answer: %d", code)
	}
}

// TestSlowCheck: a check that does not answer is reported after Timeout,
// and is not started again while its run is still going.
func TestSlowCheck(t *testing.T) {
	release := make(chan struct{})
	var runs atomic.Int32
	p := New(Check{Name: "database", Run: func(ctx context.Context) error {
		runs.Add(1)
		<-release
		return nil
	}})
	clock := time.Unix(1000, 0)
	p.now = func() time.Time { return clock }
	start := time.Now()
	r := p.Ready(context.Background())
	if r[0].Err == nil || !strings.Contains(r[0].Err.Error(), "no answer within") || time.Since(start) < Timeout {
		t.Errorf("slow check: %v after %s", r[0].Err, time.Since(start))
	}
	clock = clock.Add(2 * time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	r = p.Ready(ctx) // the caller's deadline is shorter than Timeout
	cancel()
	if r[0].Err == nil || runs.Load() != 1 {
		t.Errorf("second probe: %v, %d runs (want the first run still pending, 1 run)", r[0].Err, runs.Load())
	}
	close(release)
	clock = clock.Add(2 * time.Second)
	deadline := time.Now().Add(10 * time.Second)
	for {
		// The pending run ends: a probe reports its outcome (or that of a
		// new run) and the check holds.
		r = p.Ready(context.Background())
		if r[0].Err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("check never recovered: %v", r[0].Err)
		}
		clock = clock.Add(2 * time.Second)
	}
	if n := runs.Load(); n > 2 {
		t.Errorf("%d runs, want at most 2", n)
	}
}
