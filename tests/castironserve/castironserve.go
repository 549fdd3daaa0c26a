// Package castironserve builds castiron and runs `castiron serve` for the tests
// that drive it as a process: the openstack CLI test, tempest, the
// operations tests.
package castironserve

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Build compiles castiron into dir the way CI ships it (static, CGO off)
// and returns the binary's path.
func Build(t testing.TB, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "castiron")
	cmd := exec.Command("go", "build", "-trimpath", "-o", bin, "castiron")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// Server is a running `castiron serve`.
type Server struct {
	Endpoint string // http://127.0.0.1:PORT
	LogPath  string
	cmd      *exec.Cmd
	exited   chan struct{}
}

// listenRE finds the bound address in the first log line, text or JSON
// (--log-format json).
var listenRE = regexp.MustCompile(`msg="castiron serving".* listen=(\S+)|"msg":"castiron serving".*"listen":"([^"]+)"`)

// Start runs `bin serve` on 127.0.0.1:0 with dataDir, logging (debug) to
// logPath, reads the bound address from the log, waits until GET /v1
// answers (200, or 401 behind --htpasswd) and stops it by PID when the
// test ends, with its log in the test output if the test failed.
func Start(t testing.TB, bin, dataDir, logPath string, extra ...string) *Server {
	t.Helper()
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--log-level", "debug"}, extra...)...)
	cmd.Env = Env()
	cmd.Stdout, cmd.Stderr = logf, logf
	// A test binary killed by its -timeout runs no cleanup: the kernel ends
	// the server with it instead of leaving it serving.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("start castiron: %v", err)
	}
	s := &Server{cmd: cmd, LogPath: logPath, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); logf.Close(); close(s.exited) }()
	t.Cleanup(func() {
		pid := cmd.Process.Pid
		select {
		case <-s.exited: // stopped by the test already
		default:
			_ = syscall.Kill(pid, syscall.SIGTERM)
			select {
			case <-s.exited:
			case <-time.After(20 * time.Second):
				t.Errorf("castiron (pid %d) did not stop on SIGTERM; killing it", pid)
				_ = syscall.Kill(pid, syscall.SIGKILL)
				<-s.exited
			}
		}
		if t.Failed() {
			s.DumpLog(t)
		}
	})
	deadline := time.Now().Add(60 * time.Second)
	for s.Endpoint == "" {
		select {
		case <-s.exited:
			s.DumpLog(t)
			t.Fatalf("castiron exited before serving")
		default:
		}
		if time.Now().After(deadline) {
			s.DumpLog(t)
			t.Fatalf("castiron did not log its listen address within 60s")
		}
		if b, err := os.ReadFile(logPath); err == nil {
			if m := listenRE.FindSubmatch(b); m != nil {
				s.Endpoint = "http://" + string(m[1]) + string(m[2])
				break
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", s.Endpoint+"/v1", nil)
		resp, err := http.DefaultClient.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK || resp.StatusCode == http.StatusUnauthorized {
				return s
			}
		}
		if time.Now().After(deadline) {
			s.DumpLog(t)
			t.Fatalf("GET %s/v1 did not answer 200 (or 401) within 60s (last error %v)", s.Endpoint, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Stop sends SIGTERM and waits until the server has exited (a test that
// needs its data dir unlocked before the test ends).
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	<-s.exited
}

// PID is the server process's id.
func (s *Server) PID() int { return s.cmd.Process.Pid }

// DumpLog puts the end of the server's log into the test output.
func (s *Server) DumpLog(t testing.TB) {
	b, _ := os.ReadFile(s.LogPath)
	const max = 20000
	if len(b) > max {
		b = append([]byte("...\n"), b[len(b)-max:]...)
	}
	t.Logf("castiron log (%s):\n%s", s.LogPath, b)
}

// Env is the server's environment: the caller's without CASTIRON_*
// settings.
func Env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CASTIRON_") {
			env = append(env, kv)
		}
	}
	return env
}
