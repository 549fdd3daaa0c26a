package cli

// The harness of the openstack CLI tests: a castiron process of its own, the
// openstack client run against it, and readers of its answers.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"castiron/tests/castironserve"
)

const cliConductor = "cli-test-conductor"

// cliServer is the castiron process the CLI talks to.
type cliServer struct {
	endpoint string
	*castironserve.Server
}

// cliClient runs `openstack baremetal` against one endpoint.
type cliClient struct {
	bin      string
	endpoint string
	env      []string
	auth     []string // --os-auth-type ... (default: none)
}

// cliBuild compiles castiron the way `make build` does (static, CGO off).
func cliBuild(t *testing.T, dir string) string { return castironserve.Build(t, dir) }

// cliStart runs `castiron serve` on 127.0.0.1:0 as the CLI test's
// conductor, waits for GET /v1, and stops it by PID when the test ends.
func cliStart(t *testing.T, bin, dataDir, logPath string, extra ...string) *cliServer {
	t.Helper()
	s := castironserve.Start(t, bin, dataDir, logPath, append([]string{"--conductor-name", cliConductor}, extra...)...)
	return &cliServer{endpoint: s.Endpoint, Server: s}
}

// cliEnv is the client's environment: no OS_* settings or clouds.yaml of
// the caller, a private HOME, no Python bytecode writes.
func cliEnv(dir string) []string {
	home := filepath.Join(dir, "home")
	_ = os.MkdirAll(home, 0o700)
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "OS_") || strings.HasPrefix(kv, "HOME=") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "HOME="+home, "PYTHONDONTWRITEBYTECODE=1")
}

type cliResult struct {
	args           []string
	stdout, stderr string
	err            error
}

// exec runs `openstack --debug ... baremetal ARGS`; --debug puts the HTTP
// exchange on stderr, which failures quote.
func (c *cliClient) exec(args ...string) cliResult {
	auth := c.auth
	if auth == nil {
		auth = []string{"--os-auth-type", "none"}
	}
	full := append(append(auth, "--os-endpoint", c.endpoint, "--debug", "baremetal"), args...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, full...)
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return cliResult{args: args, stdout: out.String(), stderr: errb.String(), err: err}
}

// http is the request/response part of the client's debug output plus its
// last lines (the error it printed).
func (r cliResult) http() string {
	var b strings.Builder
	var lines []string
	sc := bufio.NewScanner(strings.NewReader(r.stderr))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		lines = append(lines, l)
		if strings.HasPrefix(l, "REQ: ") || strings.HasPrefix(l, "RESP: ") || strings.HasPrefix(l, "RESP BODY: ") {
			if len(l) > 1500 {
				l = l[:1500] + "..."
			}
			b.WriteString("    " + l + "\n")
		}
	}
	if n := len(lines); n > 0 {
		b.WriteString("  client's last lines:\n")
		for _, l := range lines[max(0, n-4):] {
			b.WriteString("    " + l + "\n")
		}
	}
	return b.String()
}

func (r cliResult) String() string { return "openstack baremetal " + strings.Join(r.args, " ") }

// run runs a command that must succeed and returns its stdout.
func (c *cliClient) run(t *testing.T, args ...string) string {
	t.Helper()
	r := c.exec(args...)
	if r.err != nil {
		t.Fatalf("%s: %v\n  stdout: %s\n  HTTP:\n%s", r, r.err, r.stdout, r.http())
	}
	t.Logf("ok: %s", r)
	return r.stdout
}

// json runs a command with -f json and decodes its output into v.
func (c *cliClient) json(t *testing.T, v any, args ...string) {
	t.Helper()
	out := c.run(t, append(args, "-f", "json")...)
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("openstack baremetal %s -f json: bad JSON: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// fail runs a command that must exit non-zero with want in its stderr.
func (c *cliClient) fail(t *testing.T, want string, args ...string) {
	t.Helper()
	r := c.exec(args...)
	if r.err == nil {
		t.Errorf("%s: succeeded, want failure %q\n  stdout: %s\n  HTTP:\n%s", r, want, r.stdout, r.http())
		return
	}
	if _, ok := r.err.(*exec.ExitError); !ok {
		t.Errorf("%s: %v", r, r.err)
		return
	}
	if !strings.Contains(r.stderr, want) {
		t.Errorf("%s: exit %v, want message %q\n  HTTP:\n%s", r, r.err, want, r.http())
		return
	}
	t.Logf("ok (fails as it should): %s", r)
}

// cliState checks provision_state and target_provision_state ("" = null).
func cliState(t *testing.T, c *cliClient, ident, state, target string) map[string]any {
	t.Helper()
	var node map[string]any
	c.json(t, &node, "node", "show", ident)
	want := map[string]any{"provision_state": state, "target_provision_state": nil}
	if target != "" {
		want["target_provision_state"] = target
	}
	cliWant(t, "node "+ident, node, want)
	return node
}

// cliWaitState polls `node show` until provision_state is state.
func cliWaitState(t *testing.T, c *cliClient, ident, state string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var node map[string]any
		c.json(t, &node, "node", "show", ident)
		if node["provision_state"] == state {
			return node
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s: provision_state %v after %v, want %q (last_error %v)", ident, node["provision_state"], timeout, state, node["last_error"])
		}
		time.Sleep(time.Second)
	}
}

// cliWant compares top-level fields; nil means JSON null.
func cliWant(t *testing.T, what string, got map[string]any, want map[string]any) {
	t.Helper()
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: field %q missing", what, k)
			continue
		}
		if w == nil {
			if g != nil {
				t.Errorf("%s: %s = %v, want null", what, k, g)
			}
			continue
		}
		if fmt.Sprint(g) != fmt.Sprint(w) {
			t.Errorf("%s: %s = %v, want %v", what, k, g, w)
		}
	}
}

// cliWantMap compares entries of a JSON object field by their printed form
// (the client may send "4" or 4).
func cliWantMap(t *testing.T, what string, got any, want map[string]any) {
	t.Helper()
	m, ok := got.(map[string]any)
	if !ok {
		t.Errorf("%s: got %T %v, want an object", what, got, got)
		return
	}
	cliWant(t, what, m, want)
}

// cliFind returns the first row whose column col equals val.
func cliFind(rows []map[string]any, col, val string) map[string]any {
	for _, r := range rows {
		if fmt.Sprint(r[col]) == val {
			return r
		}
	}
	return nil
}

// cliColumn returns column col of rows, sorted.
func cliColumn(rows []map[string]any, col string) []string {
	var out []string
	for _, r := range rows {
		out = append(out, fmt.Sprint(r[col]))
	}
	sort.Strings(out)
	return out
}

// cliContains reports whether a JSON list (or the client's "a, b" string
// rendering of one) holds s.
func cliContains(v any, s string) bool {
	switch l := v.(type) {
	case []any:
		for _, e := range l {
			if fmt.Sprint(e) == s {
				return true
			}
		}
	case string:
		for _, e := range strings.Split(l, ",") {
			if strings.TrimSpace(e) == s {
				return true
			}
		}
	}
	return false
}
