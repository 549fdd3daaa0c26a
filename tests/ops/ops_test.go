package ops

// Tests of castiron as a service (issue 16): health and readiness probes,
// metrics, logs, backup and restore, each against a running castiron
// process built once for the package's tests.

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
	_ "modernc.org/sqlite" // the "sqlite" driver TestHealthProbes locks the database with (the root package had it through storage)

	"castiron/tests/castironserve"
)

var opsBin struct {
	once      sync.Once
	dir, path string
	err       error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if opsBin.dir != "" {
		os.RemoveAll(opsBin.dir)
	}
	os.Exit(code)
}

// opsBinary builds castiron once for the tests that run it, the way
// castironserve.Build does (static, CGO off, the module's main package).
func opsBinary(t *testing.T) string {
	t.Helper()
	opsBin.once.Do(func() {
		if opsBin.dir, opsBin.err = os.MkdirTemp("", "castiron-ops-bin-"); opsBin.err != nil {
			return
		}
		opsBin.path = filepath.Join(opsBin.dir, "castiron")
		cmd := exec.Command("go", "build", "-trimpath", "-o", opsBin.path, "castiron")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			opsBin.err = fmt.Errorf("%v\n%s", err, out)
		}
	})
	if opsBin.err != nil {
		t.Fatalf("go build: %v", opsBin.err)
	}
	return opsBin.path
}

// opsConductor is the conductor name of the castiron these tests run (the
// CLI test's, as when both lived in the root package).
const opsConductor = "cli-test-conductor"

// opsStart runs `castiron serve` on 127.0.0.1:0, waits for GET /v1, and
// stops it by PID when the test ends.
func opsStart(t *testing.T, bin, dataDir, logPath string, extra ...string) *castironserve.Server {
	t.Helper()
	return castironserve.Start(t, bin, dataDir, logPath, append([]string{"--conductor-name", opsConductor}, extra...)...)
}

// opsGet is a GET with optional basic auth; it returns status and body.
func opsGet(t *testing.T, url string, auth ...string) (int, string, http.Header) {
	t.Helper()
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(auth) == 2 {
		req.SetBasicAuth(auth[0], auth[1])
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.89")
	c := &http.Client{Timeout: 20 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func writeHTPasswd(t *testing.T, dir, user, pass string) string {
	t.Helper()
	hash, err := bcrypt.GenerateFromPassword([]byte(pass), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(p, []byte(user+":"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHealthProbes: /healthz and /readyz answer without credentials on a
// server that requires them, say nothing but the checks, and /readyz names
// the database when another process holds its write lock.
func TestHealthProbes(t *testing.T) {
	dir := t.TempDir()
	bin := opsBinary(t)
	data := filepath.Join(dir, "data")
	srv := opsStart(t, bin, data, filepath.Join(dir, "castiron.log"),
		"--htpasswd", writeHTPasswd(t, dir, "operator", "health-pass-1"))

	if code, _, _ := opsGet(t, srv.Endpoint+"/v1/nodes"); code != http.StatusUnauthorized {
		t.Fatalf("GET /v1/nodes without credentials: %d, want 401 (auth is on)", code)
	}
	if code, body, _ := opsGet(t, srv.Endpoint+"/healthz"); code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body, hdr := opsGet(t, srv.Endpoint+"/readyz")
	if want := "[+]database ok\n[+]conductor ok\n[+]api listener ok\nready\n"; code != 200 || body != want {
		t.Errorf("/readyz: %d %q, want 200 %q", code, body, want)
	}
	for _, h := range []string{"X-Openstack-Ironic-Api-Version", "X-Openstack-Ironic-Api-Minimum-Version", "Server"} {
		if hdr.Get(h) != "" {
			t.Errorf("/readyz reveals %s: %q", h, hdr.Get(h))
		}
	}

	// /metrics follows the API's authentication.
	if code, _, _ := opsGet(t, srv.Endpoint+"/metrics"); code != http.StatusUnauthorized {
		t.Errorf("/metrics without credentials: %d, want 401", code)
	}
	if code, body, _ := opsGet(t, srv.Endpoint+"/metrics", "operator", "health-pass-1"); code != 200 || !strings.Contains(body, "castiron_build_info") {
		t.Errorf("/metrics with credentials: %d", code)
	}

	// Another process takes the database's write lock: readiness fails
	// naming the database; liveness does not.
	db, err := sql.Open("sqlite", filepath.Join(data, "castiron.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		t.Fatal(err)
	}
	waitReady := func(wantCode int, wantLine string) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			code, body, _ := opsGet(t, srv.Endpoint+"/readyz")
			if code == wantCode && strings.Contains(body, wantLine) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("/readyz: %d %q, want %d with %q", code, body, wantCode, wantLine)
			}
			time.Sleep(300 * time.Millisecond)
		}
	}
	waitReady(503, "[-]database failed: ")
	if code, _, _ := opsGet(t, srv.Endpoint+"/healthz"); code != 200 {
		t.Errorf("/healthz while the database is locked: %d", code)
	}
	if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		t.Fatal(err)
	}
	waitReady(200, "[+]database ok")
}
