package main

// TestKill9Recovery is a process-level crash test: it builds the real
// castiron binary, drives it over HTTP against a real SQLite data dir, kills
// it with SIGKILL in the middle of work, restarts it on the same data dir and
// checks that nothing acknowledged was lost and that node states were
// recovered the way Ironic's conductor recovers them.

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
	"sync"
	"syscall"
	"testing"
	"time"

	"castiron/tests/castironserve"
)

const (
	k9APIVersion = "1.89"
	k9Conductor  = "test-cond"
)

// k9Server is one castiron process started by the test.
type k9Server struct {
	t       *testing.T
	cmd     *exec.Cmd
	pid     int
	base    string
	logPath string
	exited  chan struct{} // closed when Wait returns
	waitErr error
	http    *http.Client
}

// k9Build compiles the module's main package into dir.
func k9Build(t *testing.T, dir string) string {
	t.Helper()
	start := time.Now()
	bin := castironserve.Build(t, dir)
	t.Logf("built %s in %s", bin, time.Since(start).Round(time.Millisecond))
	return bin
}

// k9FreePort returns a TCP port on loopback that was free a moment ago.
func k9FreePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// k9Start runs bin serve on dataDir and waits until the API answers. A lost
// race for the port (another process took it) is retried with a new one.
func k9Start(t *testing.T, bin, dataDir, logDir string, extra ...string) *k9Server {
	t.Helper()
	for attempt := 0; ; attempt++ {
		s, retry := k9TryStart(t, bin, dataDir, logDir, attempt, extra...)
		if s != nil {
			return s
		}
		if !retry || attempt >= 4 {
			t.Fatalf("castiron did not start")
		}
	}
}

func k9TryStart(t *testing.T, bin, dataDir, logDir string, attempt int, extra ...string) (*k9Server, bool) {
	t.Helper()
	port := k9FreePort(t)
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	logPath := filepath.Join(logDir, fmt.Sprintf("castiron-%d-%d.log", time.Now().UnixNano(), attempt))
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"serve", "--listen", addr, "--data-dir", dataDir,
		"--conductor-name", k9Conductor, "--log-level", "debug"}, extra...)
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
	s := &k9Server{
		t: t, cmd: cmd, pid: cmd.Process.Pid, base: "http://" + addr, logPath: logPath,
		exited: make(chan struct{}),
		http:   &http.Client{Timeout: 15 * time.Second},
	}
	go func() {
		s.waitErr = cmd.Wait()
		logf.Close()
		close(s.exited)
	}()
	// Only this PID, and only if it is still ours (not yet reaped).
	t.Cleanup(func() { s.kill9() })
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
		req, _ := http.NewRequest("GET", s.base+"/v1", nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", k9APIVersion)
		c := &http.Client{Timeout: 2 * time.Second}
		if resp, err := c.Do(req); err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Logf("castiron pid %d serving on %s after %s (args %v)", s.pid, addr,
					time.Since(started).Round(time.Millisecond), extra)
				return s, false
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("castiron pid %d not serving on %s after 60s", s.pid, addr)
	return nil, false
}

// kill9 sends SIGKILL to the process this server started and waits for it
// to be reaped. It is a no-op once the process has exited.
func (s *k9Server) kill9() {
	select {
	case <-s.exited:
		return
	default:
	}
	if err := syscall.Kill(s.pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		s.t.Errorf("kill -9 %d: %v", s.pid, err)
	}
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		s.t.Errorf("pid %d still running 30s after SIGKILL", s.pid)
	}
}

// do sends one API request and decodes a JSON object reply (nil for none).
func (s *k9Server) do(method, path string, body any) (int, map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.base+path, rd)
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", k9APIVersion)
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

// must is do that fails the test unless the status is want.
func (s *k9Server) must(want int, method, path string, body any) map[string]any {
	s.t.Helper()
	code, out, err := s.do(method, path, body)
	if err != nil {
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	if code != want {
		s.t.Fatalf("%s %s: status %d, want %d: %v", method, path, code, want, out)
	}
	return out
}

func (s *k9Server) node(id string) map[string]any {
	s.t.Helper()
	return s.must(http.StatusOK, "GET", "/v1/nodes/"+id, nil)
}

// waitNode polls the node until ok says so or timeout passes.
func (s *k9Server) waitNode(id string, timeout time.Duration, what string, ok func(n map[string]any) bool) map[string]any {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	start := time.Now()
	var n map[string]any
	for {
		n = s.node(id)
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

func (s *k9Server) waitState(id, state string, timeout time.Duration) map[string]any {
	s.t.Helper()
	return s.waitNode(id, timeout, fmt.Sprintf("in %q and unreserved", state), func(n map[string]any) bool {
		return n["provision_state"] == state && n["reservation"] == nil
	})
}

// k9BlackHole is a loopback UDP port that reads and never answers: a BMC
// that is down. (An unbound port would answer ICMP port unreachable at once.)
func k9BlackHole(t *testing.T) int {
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

func k9Str(v any) string {
	s, _ := v.(string)
	return s
}

// k9Acked is a node the API acknowledged with 201.
type k9Acked struct {
	uuid, name string
	properties map[string]any
	extra      map[string]any
	desc       string
	rc         string
}

func TestKill9Recovery(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	t0 := time.Now()
	tmp := t.TempDir()
	dataDir := filepath.Join(tmp, "data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := k9Build(t, tmp)
	bmcPort := k9BlackHole(t)

	// ---- Run 1: set the scene, then kill -9 in the middle of it. ----
	s1 := k9Start(t, bin, dataDir, tmp, "--callback-timeout", "30m")

	// (d), (e): fake-hardware nodes with agent inspection wait in
	// "inspect wait" for a ramdisk that never calls back.
	mkAgent := func(name string) string {
		n := s1.must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
			"name": name, "driver": "fake-hardware", "inspect_interface": "agent",
		})
		return k9Str(n["uuid"])
	}
	waitID, abortID := mkAgent("k9-inspect-wait"), mkAgent("k9-inspect-abort")
	for _, id := range []string{waitID, abortID} {
		s1.must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "manage"})
	}
	for _, id := range []string{waitID, abortID} {
		s1.waitState(id, "manageable", 30*time.Second)
		s1.must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "inspect"})
	}
	var waitUpdatedAt string
	for _, id := range []string{waitID, abortID} {
		n := s1.waitState(id, "inspect wait", 30*time.Second)
		if id == waitID {
			waitUpdatedAt = k9Str(n["provision_updated_at"])
			if waitUpdatedAt == "" {
				t.Fatalf("inspect wait node has no provision_updated_at: %v", n)
			}
		}
	}

	// (b), (c): ipmi nodes whose BMC never answers.
	ipmiInfo := map[string]any{
		"ipmi_address": "127.0.0.1", "ipmi_port": bmcPort,
		"ipmi_username": "admin", "ipmi_password": "secret",
	}
	verifyID := k9Str(s1.must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
		"name": "k9-verifying", "driver": "ipmi", "driver_info": ipmiInfo,
	})["uuid"])
	powerID := k9Str(s1.must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
		"name": "k9-power", "driver": "ipmi", "driver_info": ipmiInfo,
	})["uuid"])

	// (a): writers keep creating nodes until the kill; every 201 must survive.
	var (
		mu    sync.Mutex
		acked []k9Acked
	)
	stopWriters := make(chan struct{})
	var writers sync.WaitGroup
	const nWriters = 3
	for w := 0; w < nWriters; w++ {
		writers.Add(1)
		go func(w int) {
			defer writers.Done()
			cl := &http.Client{Timeout: 15 * time.Second}
			for i := 0; ; i++ {
				select {
				case <-stopWriters:
					return
				default:
				}
				a := k9Acked{
					name:       fmt.Sprintf("k9-durable-%d-%d", w, i),
					properties: map[string]any{"cpus": float64(i%64 + 1), "memory_mb": float64(1024 * (w + 1)), "cpu_arch": "x86_64"},
					extra:      map[string]any{"writer": float64(w), "seq": float64(i), "tag": fmt.Sprintf("w%d-i%d", w, i)},
					desc:       fmt.Sprintf("durability probe %d/%d", w, i),
					rc:         fmt.Sprintf("rc-%d", w),
				}
				body, _ := json.Marshal(map[string]any{
					"name": a.name, "driver": "fake-hardware", "properties": a.properties,
					"extra": a.extra, "description": a.desc, "resource_class": a.rc,
				})
				req, _ := http.NewRequest("POST", s1.base+"/v1/nodes", bytes.NewReader(body))
				req.Header.Set("X-OpenStack-Ironic-API-Version", k9APIVersion)
				req.Header.Set("Content-Type", "application/json")
				resp, err := cl.Do(req)
				if err != nil {
					return // the server is gone
				}
				raw, rerr := io.ReadAll(resp.Body)
				resp.Body.Close()
				if rerr != nil || resp.StatusCode != http.StatusCreated {
					if rerr == nil {
						select {
						case <-stopWriters:
						default:
							t.Errorf("create %s: %d %s", a.name, resp.StatusCode, raw)
						}
					}
					return
				}
				var out map[string]any
				if err := json.Unmarshal(raw, &out); err != nil {
					t.Errorf("create %s: %v", a.name, err)
					return
				}
				a.uuid = k9Str(out["uuid"])
				mu.Lock()
				acked = append(acked, a)
				mu.Unlock()
			}
		}(w)
	}
	countAcked := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }
	deadline := time.Now().Add(60 * time.Second)
	for countAcked() < 60 && time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
	}
	if countAcked() < 60 {
		close(stopWriters)
		writers.Wait()
		t.Fatalf("only %d nodes created in 60s", countAcked())
	}

	// Start the two BMC operations last: the driver gives up on a silent
	// BMC after a few seconds, and the kill must land before that.
	opStart := time.Now()
	s1.must(http.StatusAccepted, "PUT", "/v1/nodes/"+verifyID+"/states/provision", map[string]any{"target": "manage"})
	s1.must(http.StatusAccepted, "PUT", "/v1/nodes/"+powerID+"/states/power", map[string]any{"target": "power on"})
	if n := s1.node(verifyID); n["provision_state"] != "verifying" || n["reservation"] != k9Conductor {
		t.Fatalf("before kill: verify node provision_state=%v reservation=%v last_error=%v (want verifying, %s)",
			n["provision_state"], n["reservation"], n["last_error"], k9Conductor)
	}
	if n := s1.node(powerID); n["target_power_state"] != "power on" || n["reservation"] != k9Conductor {
		t.Fatalf("before kill: power node target_power_state=%v reservation=%v last_error=%v (want power on, %s)",
			n["target_power_state"], n["reservation"], n["last_error"], k9Conductor)
	}
	ackedAtKill := countAcked()
	s1.kill9()
	t.Logf("kill -9 pid %d %s after the BMC operations started, %d nodes acknowledged so far",
		s1.pid, time.Since(opStart).Round(time.Millisecond), ackedAtKill)
	close(stopWriters)
	writers.Wait()
	if t.Failed() {
		t.FailNow()
	}
	mu.Lock()
	durable := append([]k9Acked(nil), acked...)
	mu.Unlock()

	// ---- Run 2: same data dir, same conductor name. ----
	s2 := k9Start(t, bin, dataDir, tmp, "--callback-timeout", "30m")

	// (a) every acknowledged node is there, fields intact.
	for _, a := range durable {
		n := s2.node(a.uuid)
		if n["name"] != a.name || n["description"] != a.desc || n["resource_class"] != a.rc ||
			n["driver"] != "fake-hardware" || n["provision_state"] != "enroll" {
			t.Errorf("node %s (%s) after restart: name=%v description=%v resource_class=%v driver=%v provision_state=%v",
				a.uuid, a.name, n["name"], n["description"], n["resource_class"], n["driver"], n["provision_state"])
		}
		if !k9SameJSON(n["properties"], a.properties) || !k9SameJSON(n["extra"], a.extra) {
			t.Errorf("node %s (%s) after restart: properties=%v extra=%v, want %v %v",
				a.uuid, a.name, n["properties"], n["extra"], a.properties, a.extra)
		}
		if n["reservation"] != nil {
			t.Errorf("node %s reserved by %v after restart", a.uuid, n["reservation"])
		}
	}
	t.Logf("(a) all %d acknowledged nodes survived kill -9", len(durable))

	// (b) verifying fails back to enroll.
	n := s2.node(verifyID)
	if n["provision_state"] != "enroll" || n["target_provision_state"] != nil || n["reservation"] != nil {
		t.Errorf("(b) verify node after restart: provision_state=%v target_provision_state=%v reservation=%v, want enroll, null, null",
			n["provision_state"], n["target_provision_state"], n["reservation"])
	}
	if le := k9Str(n["last_error"]); !strings.Contains(le, "restarted") || !strings.Contains(le, "verifying") {
		t.Errorf("(b) verify node last_error = %q, want a mention of the conductor restart in verifying", le)
	} else {
		t.Logf("(b) verifying -> enroll: %s", le)
	}

	// (c) the pending power operation is cleared.
	n = s2.node(powerID)
	if n["target_power_state"] != nil || n["reservation"] != nil {
		t.Errorf("(c) power node after restart: target_power_state=%v reservation=%v, want null, null",
			n["target_power_state"], n["reservation"])
	}
	if le := k9Str(n["last_error"]); !strings.Contains(le, "aborted") || !strings.Contains(le, "power") {
		t.Errorf("(c) power node last_error = %q, want the pending power operation reported aborted", le)
	} else {
		t.Logf("(c) pending power operation cleared: %s", le)
	}
	if n["provision_state"] != "enroll" {
		t.Errorf("(c) power node provision_state = %v, want enroll", n["provision_state"])
	}

	// (d) the wait state and its deadline survive.
	n = s2.node(waitID)
	if n["provision_state"] != "inspect wait" || n["reservation"] != nil || n["provision_updated_at"] != waitUpdatedAt {
		t.Errorf("(d) inspect wait node after restart: provision_state=%v reservation=%v provision_updated_at=%v, want inspect wait, null, %s",
			n["provision_state"], n["reservation"], n["provision_updated_at"], waitUpdatedAt)
	}

	// (e) abort works on a node that waited across the restart.
	n = s2.node(abortID)
	if n["provision_state"] != "inspect wait" || n["reservation"] != nil {
		t.Errorf("(e) abort node after restart: provision_state=%v reservation=%v, want inspect wait, null",
			n["provision_state"], n["reservation"])
	}
	s2.must(http.StatusAccepted, "PUT", "/v1/nodes/"+abortID+"/states/provision", map[string]any{"target": "abort"})
	n = s2.waitState(abortID, "inspect failed", 30*time.Second)
	if n["target_provision_state"] != "manageable" {
		t.Errorf("(e) aborted node target_provision_state = %v, want manageable", n["target_provision_state"])
	}
	if le := k9Str(n["last_error"]); !strings.Contains(strings.ToLower(le), "abort") {
		t.Errorf("(e) aborted node last_error = %q, want it to say aborted", le)
	}

	// (f) the conductor is alive again.
	c := s2.must(http.StatusOK, "GET", "/v1/conductors/"+k9Conductor, nil)
	if c["alive"] != true || c["hostname"] != k9Conductor {
		t.Errorf("(f) conductor after restart: %v", c)
	}
	if t.Failed() {
		t.FailNow()
	}

	// ---- Run 3: crash again, come back with a 2 s callback timeout. ----
	s2.kill9()
	s3 := k9Start(t, bin, dataDir, tmp, "--callback-timeout", "2s")
	// The first wait-timeout check runs one interval (10 s) after start.
	n = s3.waitState(waitID, "inspect failed", 40*time.Second)
	if le := k9Str(n["last_error"]); !strings.Contains(le, "Timeout reached while waiting for callback") {
		t.Errorf("(d) timed-out node last_error = %q, want a callback timeout", le)
	} else {
		t.Logf("(d) inspect wait -> inspect failed: %s", le)
	}
	if n["target_provision_state"] != "manageable" {
		t.Errorf("(d) timed-out node target_provision_state = %v, want manageable", n["target_provision_state"])
	}
	c = s3.must(http.StatusOK, "GET", "/v1/conductors/"+k9Conductor, nil)
	if c["alive"] != true {
		t.Errorf("(f) conductor after second restart: %v", c)
	}
	// Survives a second crash too.
	for _, a := range durable {
		if code, _, err := s3.do("GET", "/v1/nodes/"+a.uuid, nil); err != nil || code != http.StatusOK {
			t.Errorf("node %s after second restart: %d %v", a.uuid, code, err)
		}
	}
	s3.kill9()
	t.Logf("total %s", time.Since(t0).Round(time.Millisecond))
}

// k9SameJSON compares two JSON-decoded values.
func k9SameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
