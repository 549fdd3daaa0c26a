package recovery

// TestKill9Recovery is a process-level crash test: it builds the real
// castiron binary, drives it over HTTP against a real SQLite data dir, kills
// it with SIGKILL in the middle of work, restarts it on the same data dir and
// checks that nothing acknowledged was lost and that node states were
// recovered the way Ironic's conductor recovers them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/tests/crashtest"
)

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
	bin := crashtest.Build(t, tmp)
	bmcPort := crashtest.BlackHole(t)

	// ---- Run 1: set the scene, then kill -9 in the middle of it. ----
	s1 := crashtest.Start(t, bin, dataDir, tmp, "--callback-timeout", "30m")

	// (d), (e): fake-hardware nodes with agent inspection wait in
	// "inspect wait" for a ramdisk that never calls back.
	mkAgent := func(name string) string {
		n := s1.Must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
			"name": name, "driver": "fake-hardware", "inspect_interface": "agent",
		})
		return crashtest.Str(n["uuid"])
	}
	waitID, abortID := mkAgent("k9-inspect-wait"), mkAgent("k9-inspect-abort")
	for _, id := range []string{waitID, abortID} {
		s1.Must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "manage"})
	}
	for _, id := range []string{waitID, abortID} {
		s1.WaitState(id, "manageable", 30*time.Second)
		s1.Must(http.StatusAccepted, "PUT", "/v1/nodes/"+id+"/states/provision", map[string]any{"target": "inspect"})
	}
	var waitUpdatedAt string
	for _, id := range []string{waitID, abortID} {
		n := s1.WaitState(id, "inspect wait", 30*time.Second)
		if id == waitID {
			waitUpdatedAt = crashtest.Str(n["provision_updated_at"])
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
	verifyID := crashtest.Str(s1.Must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
		"name": "k9-verifying", "driver": "ipmi", "driver_info": ipmiInfo,
	})["uuid"])
	powerID := crashtest.Str(s1.Must(http.StatusCreated, "POST", "/v1/nodes", map[string]any{
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
				req, _ := http.NewRequest("POST", s1.Base+"/v1/nodes", bytes.NewReader(body))
				req.Header.Set("X-OpenStack-Ironic-API-Version", crashtest.APIVersion)
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
				a.uuid = crashtest.Str(out["uuid"])
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
	s1.Must(http.StatusAccepted, "PUT", "/v1/nodes/"+verifyID+"/states/provision", map[string]any{"target": "manage"})
	s1.Must(http.StatusAccepted, "PUT", "/v1/nodes/"+powerID+"/states/power", map[string]any{"target": "power on"})
	if n := s1.Node(verifyID); n["provision_state"] != "verifying" || n["reservation"] != crashtest.Conductor {
		t.Fatalf("before kill: verify node provision_state=%v reservation=%v last_error=%v (want verifying, %s)",
			n["provision_state"], n["reservation"], n["last_error"], crashtest.Conductor)
	}
	if n := s1.Node(powerID); n["target_power_state"] != "power on" || n["reservation"] != crashtest.Conductor {
		t.Fatalf("before kill: power node target_power_state=%v reservation=%v last_error=%v (want power on, %s)",
			n["target_power_state"], n["reservation"], n["last_error"], crashtest.Conductor)
	}
	ackedAtKill := countAcked()
	s1.Kill9()
	t.Logf("kill -9 pid %d %s after the BMC operations started, %d nodes acknowledged so far",
		s1.PID, time.Since(opStart).Round(time.Millisecond), ackedAtKill)
	close(stopWriters)
	writers.Wait()
	if t.Failed() {
		t.FailNow()
	}
	mu.Lock()
	durable := append([]k9Acked(nil), acked...)
	mu.Unlock()

	// ---- Run 2: same data dir, same conductor name. ----
	s2 := crashtest.Start(t, bin, dataDir, tmp, "--callback-timeout", "30m")

	// (a) every acknowledged node is there, fields intact.
	for _, a := range durable {
		n := s2.Node(a.uuid)
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
	n := s2.Node(verifyID)
	if n["provision_state"] != "enroll" || n["target_provision_state"] != nil || n["reservation"] != nil {
		t.Errorf("(b) verify node after restart: provision_state=%v target_provision_state=%v reservation=%v, want enroll, null, null",
			n["provision_state"], n["target_provision_state"], n["reservation"])
	}
	if le := crashtest.Str(n["last_error"]); !strings.Contains(le, "restarted") || !strings.Contains(le, "verifying") {
		t.Errorf("(b) verify node last_error = %q, want a mention of the conductor restart in verifying", le)
	} else {
		t.Logf("(b) verifying -> enroll: %s", le)
	}

	// (c) the pending power operation is cleared.
	n = s2.Node(powerID)
	if n["target_power_state"] != nil || n["reservation"] != nil {
		t.Errorf("(c) power node after restart: target_power_state=%v reservation=%v, want null, null",
			n["target_power_state"], n["reservation"])
	}
	if le := crashtest.Str(n["last_error"]); !strings.Contains(le, "aborted") || !strings.Contains(le, "power") {
		t.Errorf("(c) power node last_error = %q, want the pending power operation reported aborted", le)
	} else {
		t.Logf("(c) pending power operation cleared: %s", le)
	}
	if n["provision_state"] != "enroll" {
		t.Errorf("(c) power node provision_state = %v, want enroll", n["provision_state"])
	}

	// (d) the wait state and its deadline survive.
	n = s2.Node(waitID)
	if n["provision_state"] != "inspect wait" || n["reservation"] != nil || n["provision_updated_at"] != waitUpdatedAt {
		t.Errorf("(d) inspect wait node after restart: provision_state=%v reservation=%v provision_updated_at=%v, want inspect wait, null, %s",
			n["provision_state"], n["reservation"], n["provision_updated_at"], waitUpdatedAt)
	}

	// (e) abort works on a node that waited across the restart.
	n = s2.Node(abortID)
	if n["provision_state"] != "inspect wait" || n["reservation"] != nil {
		t.Errorf("(e) abort node after restart: provision_state=%v reservation=%v, want inspect wait, null",
			n["provision_state"], n["reservation"])
	}
	s2.Must(http.StatusAccepted, "PUT", "/v1/nodes/"+abortID+"/states/provision", map[string]any{"target": "abort"})
	n = s2.WaitState(abortID, "inspect failed", 30*time.Second)
	if n["target_provision_state"] != "manageable" {
		t.Errorf("(e) aborted node target_provision_state = %v, want manageable", n["target_provision_state"])
	}
	if le := crashtest.Str(n["last_error"]); !strings.Contains(strings.ToLower(le), "abort") {
		t.Errorf("(e) aborted node last_error = %q, want it to say aborted", le)
	}

	// (f) the conductor is alive again.
	c := s2.Must(http.StatusOK, "GET", "/v1/conductors/"+crashtest.Conductor, nil)
	if c["alive"] != true || c["hostname"] != crashtest.Conductor {
		t.Errorf("(f) conductor after restart: %v", c)
	}
	if t.Failed() {
		t.FailNow()
	}

	// ---- Run 3: crash again, come back with a 2 s callback timeout. ----
	s2.Kill9()
	s3 := crashtest.Start(t, bin, dataDir, tmp, "--callback-timeout", "2s")
	// The first wait-timeout check runs one interval (10 s) after start.
	n = s3.WaitState(waitID, "inspect failed", 40*time.Second)
	if le := crashtest.Str(n["last_error"]); !strings.Contains(le, "Timeout reached while waiting for callback") {
		t.Errorf("(d) timed-out node last_error = %q, want a callback timeout", le)
	} else {
		t.Logf("(d) inspect wait -> inspect failed: %s", le)
	}
	if n["target_provision_state"] != "manageable" {
		t.Errorf("(d) timed-out node target_provision_state = %v, want manageable", n["target_provision_state"])
	}
	c = s3.Must(http.StatusOK, "GET", "/v1/conductors/"+crashtest.Conductor, nil)
	if c["alive"] != true {
		t.Errorf("(f) conductor after second restart: %v", c)
	}
	// Survives a second crash too.
	for _, a := range durable {
		if code, _, err := s3.Do("GET", "/v1/nodes/"+a.uuid, nil); err != nil || code != http.StatusOK {
			t.Errorf("node %s after second restart: %d %v", a.uuid, code, err)
		}
	}
	s3.Kill9()
	t.Logf("total %s", time.Since(t0).Round(time.Millisecond))
}

// k9SameJSON compares two JSON-decoded values.
func k9SameJSON(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
