//go:build e2e

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// CastironPort is castiron's API port inside the lab's namespace.
const CastironPort = 6385

// CastironOptions tune the server; zero values take the defaults.
type CastironOptions struct {
	CallbackTimeout time.Duration // --callback-timeout [120s]
	DHCPMode        string        // --dhcp-mode [full]
	ExtraArgs       []string      // appended to the serve flags
	// NoPXE starts castiron without its PXE flags (API and BMC only): for
	// tests that need no network boot, and for checking the harness
	// against a castiron that has no PXE server.
	NoPXE bool
	// TLS serves HTTPS with castiron's own CA (--tls-auto); the test's
	// client trusts the bundle castiron writes to its data dir.
	TLS bool
}

// Castiron is the real castiron binary serving inside a lab's namespace, on
// the lab's bridge. Its embedded Client reaches it from the test process.
type Castiron struct {
	*Client
	URL     string // public URL, http://10.205.0.1:6385
	LogPath string
	DataDir string
	d       *daemon
}

// PID is the castiron process's id.
func (c *Castiron) PID() int { return c.d.PID() }

// Running reports whether the process is still up.
func (c *Castiron) Running() bool { return c.d.running() }

// castironBinary is CASTIRON_BIN, or the module built once per test run
// (`go build`, CGO_ENABLED=0 like `make build`).
func castironBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("CASTIRON_BIN"); bin != "" {
		abs, err := filepath.Abs(bin)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("CASTIRON_BIN: %v", err)
		}
		return abs
	}
	shared.buildOnce.Do(func() {
		start := time.Now()
		out := filepath.Join(shared.dir, "castiron")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "go", "build", "-o", out, ".")
		cmd.Dir = repoRoot(t)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			shared.buildErr = fmt.Errorf("go build: %w: %s", err, b)
			return
		}
		shared.binary = out
		t.Logf("built %s in %.1fs", out, time.Since(start).Seconds())
	})
	if shared.buildErr != nil {
		t.Fatalf("castiron: %v", shared.buildErr)
	}
	return shared.binary
}

func (o CastironOptions) scheme() string {
	if o.TLS {
		return "https"
	}
	return "http"
}

// castironArgs are the serve flags for a lab.
func castironArgs(l *Lab, dataDir, ramdisk string, o CastironOptions) []string {
	listen := "0.0.0.0"
	if l.Opts.IPv6Only {
		listen = "[::]"
	}
	args := []string{"serve",
		"--listen", listen + ":" + strconv.Itoa(CastironPort),
		"--data-dir", dataDir,
		"--insecure-noauth",
		"--callback-timeout", o.CallbackTimeout.String(),
	}
	if o.TLS {
		args = append(args, "--tls-auto")
	}
	if o.NoPXE {
		return append(args, o.ExtraArgs...)
	}
	args = append(args,
		"--pxe-interface", Bridge,
		"--dhcp-mode", o.DHCPMode,
		"--ipxe-dir", ipxeDirFor(),
		"--ramdisk-dir", ramdisk,
	)
	if !l.Opts.IPv6Only {
		// IPv6: castiron derives the URL from the bridge's address and
		// hands out <prefix>::1000-1fff.
		args = append(args, "--dhcp-range", DHCPRange, "--public-url", fmt.Sprintf("%s://%s:%d", o.scheme(), ServerIP, CastironPort))
	}
	return append(args, o.ExtraArgs...)
}

// StartCastiron starts castiron inside the lab's namespace, serving PXE on
// the lab's bridge, and waits until GET /v1 answers. The lab's teardown
// stops it (SIGTERM, then SIGKILL) before the VM and the BMC; on failure its
// log tail is in the test output.
func StartCastiron(t testing.TB, l *Lab, o CastironOptions) *Castiron {
	t.Helper()
	if o.CallbackTimeout == 0 {
		o.CallbackTimeout = 120 * time.Second
	}
	if o.DHCPMode == "" {
		o.DHCPMode = "full"
	}
	ramdisk := ""
	if !o.NoPXE {
		ramdisk = ramdiskDir(t)
	}
	bin := castironBinary(t)
	dataDir := filepath.Join(l.Dir, "castiron-data")
	if err := os.MkdirAll(dataDir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := castironArgs(l, dataDir, ramdisk, o)
	d, err := l.StartDaemon("castiron", append([]string{bin}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	c := &Castiron{
		URL:     fmt.Sprintf("%s://%s:%d", o.scheme(), l.ServerAddr(), CastironPort),
		LogPath: filepath.Join(l.Dir, "castiron.log"),
		DataDir: dataDir,
		d:       d,
	}
	c.Client = &Client{Base: c.URL, HTTP: l.HTTPClient(30 * time.Second)}

	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := c.trustBundle(o)
		if err == nil {
			err = c.Do(ctx, "GET", "/v1", nil, nil)
		}
		if err == nil {
			break
		}
		if !d.running() {
			t.Fatalf("castiron exited at start (%v): %s %v\n%s", d.err, bin, args, tailFile(c.LogPath, 30))
		}
		select {
		case <-ctx.Done():
			t.Fatalf("castiron: GET %s/v1 did not answer within 30s: %v", c.URL, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Logf("castiron pid %d serving %s in %s (ready in %.2fs)", d.PID(), c.URL, l.NS.Name, time.Since(start).Seconds())
	return c
}

// trustBundle makes the client trust castiron's CA once castiron has
// written its bundle (TLS only).
func (c *Castiron) trustBundle(o CastironOptions) error {
	if !o.TLS {
		return nil
	}
	tr := c.HTTP.Transport.(*http.Transport)
	if tr.TLSClientConfig != nil {
		return nil
	}
	b, err := os.ReadFile(filepath.Join(c.DataDir, "tls", "ca-bundle.pem"))
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return fmt.Errorf("no certificate in castiron's CA bundle")
	}
	tr.TLSClientConfig = &tls.Config{RootCAs: pool}
	return nil
}

// EnrollIPMINode creates an ipmi node for the lab's BMC (with a pxe_enabled
// port for the boot NIC's MAC when withPort), moves it to manageable and
// returns it.
func (c *Castiron) EnrollIPMINode(t testing.TB, l *Lab, name string, withPort bool) *Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	fields := map[string]any{
		"name":              name,
		"driver":            "ipmi",
		"driver_info":       l.DriverInfo(),
		"inspect_interface": "agent",
	}
	if l.Opts.Boot == "uefi" {
		fields["properties"] = map[string]any{"capabilities": "boot_mode:uefi"}
	}
	n, err := c.CreateNode(ctx, fields)
	if err != nil {
		t.Fatalf("create node: %v", err)
	}
	if withPort {
		if _, err := c.CreatePort(ctx, n.UUID, l.MACs[0], true); err != nil {
			t.Fatalf("create port %s: %v", l.MACs[0], err)
		}
	}
	if err := c.SetProvisionState(ctx, n.UUID, "manage"); err != nil {
		t.Fatalf("manage: %v", err)
	}
	n, err = c.WaitProvisionState(ctx, n.UUID, "manageable", 60*time.Second)
	if err != nil {
		t.Fatalf("manage: %v", err)
	}
	return n
}
