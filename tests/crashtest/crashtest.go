// Package crashtest runs castiron as a process the test may kill -9 and
// restart on the same data dir and port: the harness of the crash-recovery
// and scale-out tests (tests/recovery, tests/scaleout), also used by
// tests/ops. (In the root package it was the k9* helpers.)
package crashtest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"castiron/tests/castironserve"
)

const (
	APIVersion = "1.89"
	Conductor  = "test-cond"
)

// Server is one castiron process started by the test.
type Server struct {
	t       *testing.T
	cmd     *exec.Cmd
	PID     int
	Base    string // http://127.0.0.1:PORT
	logPath string
	exited  chan struct{} // closed when Wait returns
	waitErr error
	http    *http.Client
}

// Build compiles the module's main package into dir.
func Build(t *testing.T, dir string) string {
	t.Helper()
	start := time.Now()
	bin := castironserve.Build(t, dir)
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// FreePort returns a TCP port on loopback that was free a moment ago.
func FreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Start runs bin serve on dataDir and waits until the API answers. A lost
// race for the port (another process took it) is retried with a new one.
func Start(t *testing.T, bin, dataDir, logDir string, extra ...string) *Server {
	t.Helper()
	for attempt := 0; ; attempt++ {
		s, retry := tryStart(t, bin, dataDir, logDir, attempt, extra...)
		if s != nil {
			return s
		}
		if !retry || attempt >= 4 {
			t.Fatalf("castiron did not start")
		}
	}
}

func tryStart(t *testing.T, bin, dataDir, logDir string, attempt int, extra ...string) (*Server, bool) {
	t.Helper()
	port := FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(logDir, fmt.Sprintf("castiron-%d-%d.log", time.Now().UnixNano(), attempt))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", addr, "--data-dir", dataDir,
		"--conductor-name", Conductor, "--log-level", "debug"}, extra...)
	cmd := exec.Command(bin, args...)
	// Ended with the test binary, even when its -timeout kills it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	// Keep the environment from configuring the server behind our back.
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CASTIRON_") {
			env = append(env, kv)
		}
	}
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	started := time.Now()
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start castiron: %v", err)
	}
	s := &Server{
		t: t, cmd: cmd, PID: cmd.Process.Pid, Base: "http://" + addr, logPath: logPath,
		exited: make(chan struct{}),
		http:   &http.Client{Timeout: 15 * time.Second},
	}
	go func() {
		s.waitErr = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	// Only this PID, and only if it is still ours (not yet reaped).
	t.Cleanup(func() { s.Kill9() })
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			if len(b) > 12000 {
				b = b[len(b)-12000:]
			}
			t.Logf("---- tail of %s ----\n%s", filepath.Base(logPath), b)
		}
	})

	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			b, _ := os.ReadFile(logPath)
			if bytes.Contains(b, []byte("address already in use")) {
				t.Logf("port %d taken, retrying", port)
				return nil, true
			}
			t.Fatalf("castiron exited before serving: %v\n%s", s.waitErr, b)
		default:
		}
		req, _ := http.NewRequest("GET", s.Base+"/v1", nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", APIVersion)
		c := &http.Client{Timeout: 2 * time.Second}
		if resp, err := c.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("castiron pid %d serving on %s after %s (args %v)", s.PID, addr,
					time.Since(started).Round(time.Millisecond), extra)
				return s, false
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("castiron pid %d not serving on %s after 60s", s.PID, addr)
	return nil, false
}

// Kill9 sends SIGKILL to the process this server started and waits for it
// to be reaped. It is a no-op once the process has exited.
func (s *Server) Kill9() {
	select {
	case <-s.exited:
		return
	default:
	}
	if err := syscall.Kill(s.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.t.Errorf("kill -9 %d: %v", s.PID, err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.t.Errorf("pid %d still running 30s after SIGKILL", s.PID)
	}
}

// LogLines returns the lines of the server's log that contain substr.
func (s *Server) LogLines(substr string) []string {
	b, _ := os.ReadFile(s.logPath)
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return out
}

// Alive reports whether the process this server started is still running.
func (s *Server) Alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// Do sends one API request and decodes a JSON object reply (nil for none).
func (s *Server) Do(method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.Base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", APIVersion)
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, nil, err
	}
	var out map[string]any
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &out); err != nil {
			return resp.StatusCode, nil, fmt.Errorf("%s %s: %d, not JSON: %q", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, out, nil
}

// Must is do that fails the test unless the status is want.
func (s *Server) Must(want int, method, path string, body any) map[string]any {
	s.t.Helper()
	code, out, err := s.Do(method, path, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if code != want {
		s.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

func (s *Server) Node(id string) map[string]any {
	s.t.Helper()
	return s.Must(http.StatusOK, "GET", "/v1/nodes/"+id, nil)
}

// WaitNode polls the node until ok says so or timeout passes.
func (s *Server) WaitNode(id string, timeout time.Duration, what string, ok func(n map[string]any) bool) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	start := time.Now()
	var n map[string]any
	for {
		n = s.Node(id)
		if ok(n) {
			s.t.Logf("node %s: %s after %s", id, what, time.Since(start).Round(time.Millisecond))
			return n
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("node %s: not %s after %s: provision_state=%v target=%v reservation=%v target_power_state=%v last_error=%v",
				id, what, timeout, n["provision_state"], n["target_provision_state"], n["reservation"],
				n["target_power_state"], n["last_error"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (s *Server) WaitState(id, state string, timeout time.Duration) map[string]any {
	s.t.Helper()
	return s.WaitNode(id, timeout, fmt.Sprintf("in %q and unreserved", state), func(n map[string]any) bool {
		return n["provision_state"] == state && n["reservation"] == nil
	})
}

// BlackHole is a loopback UDP port that reads and never answers: a BMC
// that is down. (An unbound port would answer ICMP port unreachable at once.)
func BlackHole(t *testing.T) int {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
		}
	}()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

// Str is v when it is a string, else "".
func Str(v any) string {
	s, _ := v.(string)
	return s
}
