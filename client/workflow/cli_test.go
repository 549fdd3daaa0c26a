package workflow

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/bcrypt"

	"castiron/httpapi"
	"castiron/storage"
)

// buildCastiron builds the real binary into the test's temp dir.
func buildCastiron(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := filepath.Join(t.TempDir(), "castiron")
	cmd := exec.Command("go", "build", "-o", bin, "castiron")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestBinaryNonTTY runs the built binary with its stdout on a pipe against a
// castiron with http_basic auth: plain line-by-line output, no terminal
// escapes, credentials and URL from the environment, and exit codes
// 0 (all nodes fine), 1 (a node failed, refusal, API error) and 2 (usage).
func TestBinaryNonTTY(t *testing.T) {
	bin := buildCastiron(t)
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	htpasswd := writeFile(t, "htpasswd", fmt.Sprintf("operator:%s\n", hash))
	auth, err := httpapi.LoadHTPasswd(htpasswd)
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(t, func(o *httpapi.Options) { o.Auth = auth })
	s.user, s.pass = "operator", "s3cret"
	run := func(env []string, args ...string) (int, string, string) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return code, out.String(), errb.String()
	}
	okEnv := []string{"CASTIRON_URL=" + s.url, "CASTIRON_USER=operator", "CASTIRON_PASSWORD=s3cret"}
	file := writeFile(t, "rack.json", fakeRack("bin", 5))

	code, out, errs := run(okEnv, "import", file, "--provide")
	if code != 0 {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, errs)
	}
	if strings.Contains(out, "\x1b") {
		t.Errorf("terminal escapes on a pipe:\n%q", out)
	}
	mustContain(t, "plain output", out, "bin-000: creating\n", "bin-000: manage requested\n",
		"bin-000: done: available (created, manage, provide)\n", "5 succeeded, 0 failed\n")

	// Wrong password: the server's 401 faultstring, exit 1.
	code, _, errs = run([]string{"CASTIRON_URL=" + s.url, "CASTIRON_USER=operator", "CASTIRON_PASSWORD=wrong"}, "node", "list")
	if code != 1 || !strings.Contains(errs, "401") {
		t.Errorf("wrong password: exit %d %s", code, errs)
	}
	// Flags override the environment.
	if code, out, errs := run([]string{"CASTIRON_URL=http://127.0.0.1:1"}, "conductor", "list",
		"--url", s.url, "--user", "operator", "--password", "s3cret"); code != 0 || !strings.Contains(out, "test-conductor") {
		t.Errorf("conductor list: %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = run(okEnv, "node", "list", "-o", "json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil || len(list) != 5 || list[0]["provision_state"] != "available" {
		t.Errorf("node list -o json: exit %d %v %s", code, err, out)
	}
	code, out, _ = run(okEnv, "node", "list")
	if code != 0 || !strings.Contains(out, "PROVISION STATE") || strings.Count(out, "available") != 5 {
		t.Errorf("node list: %d\n%s", code, out)
	}
	code, out, _ = run(okEnv, "node", "show", "bin-003")
	if code != 0 || !strings.Contains(out, "provision_state") || !strings.Contains(out, "bin-003") {
		t.Errorf("node show: %d\n%s", code, out)
	}
	code, _, errs = run(okEnv, "node", "show", "nope")
	if code != 1 || !strings.Contains(errs, "Node nope could not be found") {
		t.Errorf("node show nope: %d %s", code, errs)
	}

	// A node the server rejects makes the exit code 1; the others still go.
	bad := writeFile(t, "bad.json", map[string]any{"nodes": []any{
		map[string]any{"name": "ok-node", "pm_type": "fake-hardware", "mac": []string{"52:54:00:40:00:01"}},
		map[string]any{"name": "not a valid name!", "pm_type": "fake-hardware", "mac": []string{"52:54:00:40:00:02"}},
	}})
	code, out, errs = run(okEnv, "import", bad)
	if code != 1 {
		t.Fatalf("import with a bad node: exit %d\n%s\n%s", code, out, errs)
	}
	mustContain(t, "bad node", out, "not a valid name!: FAILED:", "HTTP 400", "1 succeeded, 1 failed")
	if n := s.node("ok-node"); n.ProvisionState != "manageable" {
		t.Errorf("ok-node %s", n.ProvisionState)
	}

	// Refusal: exit 1, nothing changed.
	code, _, errs = run(okEnv, "introspect", "bin-000")
	if code != 1 || !strings.Contains(errs, "bin-000 is available") {
		t.Errorf("introspect available: %d %s", code, errs)
	}
	// Usage errors: exit 2.
	for _, args := range [][]string{{"import"}, {"introspect"}, {"node"}, {"import", file, "--concurrency", "x"}} {
		if code, _, errs := run(okEnv, args...); code != 2 {
			t.Errorf("%v: exit %d %s", args, code, errs)
		}
	}
	// Nothing listens: a connection error, exit 1.
	if code, _, errs := run([]string{"CASTIRON_URL=http://127.0.0.1:1"}, "node", "list"); code != 1 || !strings.Contains(errs, "connection refused") {
		t.Errorf("no server: %d %s", code, errs)
	}
}

// TestNodeListDiscovered: `castiron node list --discovered` shows only the
// nodes discovery made (driver_internal_info.auto_discovered, which only
// the conductor sets).
func TestNodeListDiscovered(t *testing.T) {
	s := newServer(t)
	s.runWant(0, "import", writeFile(t, "rack.json", fakeRack("d", 3)))
	if _, err := s.st.UpdateNode(context.Background(), "d-001", func(n *storage.Node) (*storage.Event, error) {
		n.DriverInternalInfo["auto_discovered"] = true
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	// node's subcommand comes before the flags.
	nodeCmd := func(args ...string) (int, string, string) {
		var out, errb bytes.Buffer
		code := Run(context.Background(), "node", append([]string{args[0], "--url", s.url}, args[1:]...), &out, &errb, false)
		return code, out.String(), errb.String()
	}
	code, out, errs := nodeCmd("list", "--discovered")
	if code != 0 || !strings.Contains(out, "d-001") || strings.Contains(out, "d-000") || strings.Contains(out, "d-002") {
		t.Errorf("node list --discovered: %d\n%s\n%s", code, out, errs)
	}
	code, out, _ = nodeCmd("list", "--discovered", "-o", "json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); code != 0 || err != nil || len(list) != 1 || list[0]["name"] != "d-001" {
		t.Errorf("node list --discovered -o json: %d %v\n%s", code, err, out)
	}
	if code, out, _ := nodeCmd("list"); code != 0 || strings.Count(out, "d-00") != 3 {
		t.Errorf("node list: %d\n%s", code, out)
	}
	if code, _, errs := nodeCmd("show", "d-001", "--discovered"); code != 2 {
		t.Errorf("node show --discovered: exit %d, want 2 (usage): %s", code, errs)
	}
}
