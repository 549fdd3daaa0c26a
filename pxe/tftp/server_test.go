package tftp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	pintftp "github.com/pin/tftp/v3"

	"castiron/pxe/boot"
)

const testMAC = "52:54:00:20:20:01"

// events collects timeline events for assertions.
type events struct {
	mu  sync.Mutex
	evs []boot.Event
}

func (e *events) Record(_ context.Context, ev boot.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evs = append(e.evs, ev)
}

// waitFor returns the first event matching ok, polling until timeout.
func (e *events) waitFor(t *testing.T, timeout time.Duration, ok func(boot.Event) bool) boot.Event {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		e.mu.Lock()
		for _, ev := range e.evs {
			if ok(ev) {
				e.mu.Unlock()
				return ev
			}
		}
		e.mu.Unlock()
		if time.Now().After(deadline) {
			e.mu.Lock()
			defer e.mu.Unlock()
			t.Fatalf("no matching event within %s; have %+v", timeout, e.evs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// testFiles writes a served directory: undionly.kpxe (the real one when the
// ipxe package is installed), a 300 kB snponly.efi, and a file that exists
// but is not allowed.
func testFiles(t testing.TB) (dir string, files map[string][]byte) {
	t.Helper()
	dir = t.TempDir()
	undi, err := os.ReadFile(filepath.Join(DefaultDir, "undionly.kpxe"))
	if err != nil {
		undi = randomBytes(t, 74213)
	}
	files = map[string][]byte{
		"undionly.kpxe": undi,
		"snponly.efi":   randomBytes(t, 300*1024+7),
		"secret.txt":    []byte("not for tftp\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, files
}

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// freeUDPAddr picks a loopback port nobody uses right now (IPv6 loopback
// when the config asks for it).
func freeUDPAddr(t testing.TB, v6 bool) string {
	t.Helper()
	network, addr := "udp4", "127.0.0.1:0"
	if v6 {
		network, addr = "udp6", "[::1]:0"
	}
	c, err := net.ListenPacket(network, addr)
	if err != nil {
		t.Fatal(err)
	}
	addr = c.LocalAddr().String()
	c.Close()
	return addr
}

// startServer runs a server on a random loopback port until the test ends.
func startServer(t testing.TB, cfg Config) (addr string, rec *events) {
	t.Helper()
	rec = &events{}
	cfg.Addr = freeUDPAddr(t, cfg.Addr == "[::1]:0")
	cfg.Recorder = rec
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if cfg.MACForIP == nil {
		cfg.MACForIP = func(ip net.IP) string {
			if ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback) {
				return testMAC
			}
			return ""
		}
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	waitListening(t, cfg.Addr)
	return cfg.Addr, rec
}

// waitListening sends a harmless probe until the server answers it.
func waitListening(t testing.TB, addr string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for time.Now().Before(deadline) {
		c := client(t, addr)
		c.SetTimeout(50 * time.Millisecond)
		c.SetRetries(1)
		_, err := c.Receive("startup-probe", "octet")
		if err != nil && strings.Contains(err.Error(), "file not found") {
			return
		}
	}
	t.Fatalf("tftp server on %s did not come up", addr)
}

func client(t testing.TB, addr string) *pintftp.Client {
	t.Helper()
	c, err := pintftp.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetTimeout(2 * time.Second)
	c.SetRetries(3)
	return c
}

// fetch downloads name with pin/tftp's client.
func fetch(c *pintftp.Client, name string) (data []byte, tsize int64, err error) {
	wt, err := c.Receive(name, "octet")
	if err != nil {
		return nil, 0, err
	}
	if in, ok := wt.(pintftp.IncomingTransfer); ok {
		tsize, _ = in.Size()
	}
	var buf bytes.Buffer
	if _, err := wt.WriteTo(&buf); err != nil {
		return nil, tsize, err
	}
	return buf.Bytes(), tsize, nil
}

// requireTool skips without the tool, except in CI where it must exist.
func requireTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (required in CI)", name)
		}
		t.Skipf("%s not installed", name)
	}
	return path
}

func TestTFTPHPAClient(t *testing.T) {
	tftpBin := requireTool(t, "tftp") // Debian tftp-hpa
	dir, files := testFiles(t)
	addr, rec := startServer(t, Config{Dir: dir})
	host, port, _ := net.SplitHostPort(addr)

	tests := []struct {
		name    string
		remote  string
		wantErr bool
	}{
		{"allowed file", "undionly.kpxe", false},
		{"traversal", "../../etc/passwd", true},
		{"absolute path", "/etc/passwd", true},
		{"pxelinux probe", "pxelinux.cfg/default", true},
		{"present but not allowed", "secret.txt", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, tftpBin, "-v", "-m", "binary", host, port, "-c", "get", tc.remote, out)
			msg, err := cmd.CombinedOutput()
			if err != nil {
				t.Logf("tftp exit: %v", err)
			}
			got, readErr := os.ReadFile(out)
			if tc.wantErr {
				if !strings.Contains(string(msg), "file not found") {
					t.Fatalf("tftp-hpa output %q, want a file-not-found error", msg)
				}
				if readErr == nil && len(got) > 0 {
					t.Fatalf("refused fetch wrote %d bytes", len(got))
				}
				return
			}
			if readErr != nil || !bytes.Equal(got, files[tc.remote]) {
				t.Fatalf("fetched %d bytes (%v), want %d identical bytes; tftp said %q", len(got), readErr, len(files[tc.remote]), msg)
			}
			ev := rec.waitFor(t, 2*time.Second, func(ev boot.Event) bool { return ev.Kind == boot.TFTPServed })
			want := fmt.Sprintf("file=undionly.kpxe bytes=%d ", len(files["undionly.kpxe"]))
			if ev.MAC != testMAC || !strings.HasPrefix(ev.Detail, want) {
				t.Fatalf("event %+v, want MAC %s and detail starting %q", ev, testMAC, want)
			}
			// castiron's own time (lookup, file reads) excludes waiting
			// for the client's ACKs, so it is below the whole transfer.
			whole, err := time.ParseDuration(strings.TrimPrefix(strings.Fields(ev.Detail)[2], "duration="))
			if err != nil || ev.Took <= 0 || ev.Took > whole+time.Millisecond {
				t.Fatalf("event %+v: took %s, want > 0 and <= the transfer's %s (%v)", ev, ev.Took, whole, err)
			}
		})
	}

	t.Run("write refused", func(t *testing.T) {
		src := filepath.Join(t.TempDir(), "undionly.kpxe")
		os.WriteFile(src, []byte("overwrite attempt"), 0o644)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, tftpBin, "-v", "-m", "binary", host, port, "-c", "put", src, "undionly.kpxe")
		msg, _ := cmd.CombinedOutput()
		if !strings.Contains(string(msg), "Error code") {
			t.Fatalf("tftp-hpa put output %q, want an error from the server", msg)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "undionly.kpxe")); !bytes.Equal(got, files["undionly.kpxe"]) {
			t.Fatal("served file changed")
		}
	})
}

func TestRefusedNames(t *testing.T) {
	dir, _ := testFiles(t)
	addr, rec := startServer(t, Config{Dir: dir})
	names := []string{
		"../../etc/passwd",
		"/etc/passwd",
		"pxelinux.cfg/default",
		"pxelinux.cfg/01-52-54-00-20-20-01",
		"ldlinux.c32",
		"secret.txt",
		"./undionly.kpxe",
		"/undionly.kpxe",
		"undionly.kpxe/../secret.txt",
		"UNDIONLY.KPXE",
		"ipxe-arm64.efi", // allowed, not on disk
		strings.Repeat("A", 400),
	}
	for _, name := range names {
		t.Run(name[:min(len(name), 40)], func(t *testing.T) {
			c := client(t, addr)
			start := time.Now()
			_, _, err := fetch(c, name)
			if err == nil || !strings.Contains(err.Error(), "file not found") {
				t.Fatalf("fetch %q: err %v, want file not found", name, err)
			}
			t.Logf("refused in %s", time.Since(start))
		})
	}
	rec.waitFor(t, time.Second, func(ev boot.Event) bool {
		return ev.Kind == boot.TFTPRefused && ev.MAC == testMAC && strings.Contains(ev.Detail, `"pxelinux.cfg/default" not allowed`)
	})
	rec.waitFor(t, time.Second, func(ev boot.Event) bool {
		return ev.Kind == boot.TFTPRefused && strings.Contains(ev.Detail, `"ipxe-arm64.efi" missing`)
	})
}

func TestWriteRefused(t *testing.T) {
	dir, files := testFiles(t)
	addr, rec := startServer(t, Config{Dir: dir})
	for _, name := range []string{"undionly.kpxe", "new.bin", "../escape"} {
		c := client(t, addr)
		rf, err := c.Send(name, "octet")
		if err == nil {
			_, err = rf.ReadFrom(strings.NewReader("payload"))
		}
		if err == nil {
			t.Fatalf("write %q accepted", name)
		}
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "undionly.kpxe")); !bytes.Equal(got, files["undionly.kpxe"]) {
		t.Fatal("served file changed")
	}
	if _, err := os.Stat(filepath.Join(dir, "new.bin")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("new.bin created: %v", err)
	}
	rec.waitFor(t, time.Second, func(ev boot.Event) bool {
		return ev.Kind == boot.TFTPRefused && strings.Contains(ev.Detail, `"new.bin" write`)
	})
}

func TestOptionNegotiation(t *testing.T) {
	dir, files := testFiles(t)
	addr, _ := startServer(t, Config{Dir: dir})
	tests := []struct {
		name    string
		file    string
		blksize int
		tsize   bool
	}{
		{"plain 512", "undionly.kpxe", 0, false},
		{"tsize only", "undionly.kpxe", 0, true},
		{"blksize 1468 + tsize", "snponly.efi", 1468, true},
		{"blksize 8192", "snponly.efi", 8192, false},
		{"blksize 1408 (pxelinux)", "undionly.kpxe", 1408, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := client(t, addr)
			if tc.blksize > 0 {
				c.SetBlockSize(tc.blksize)
			}
			c.RequestTSize(tc.tsize)
			got, tsize, err := fetch(c, tc.file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, files[tc.file]) {
				t.Fatalf("got %d bytes, want %d identical", len(got), len(files[tc.file]))
			}
			if tc.tsize && tsize != int64(len(files[tc.file])) {
				t.Fatalf("tsize %d, want %d", tsize, len(files[tc.file]))
			}
		})
	}
}

func TestEmbeddedFS(t *testing.T) {
	data := []byte("embedded ipxe binary\n")
	addr, _ := startServer(t, Config{FS: fstest.MapFS{
		"snponly.efi": {Data: data},
		"secret.txt":  {Data: []byte("no")},
	}})
	c := client(t, addr)
	c.RequestTSize(true)
	got, tsize, err := fetch(c, "snponly.efi")
	if err != nil || !bytes.Equal(got, data) || tsize != int64(len(data)) {
		t.Fatalf("got %q tsize %d err %v", got, tsize, err)
	}
	if _, _, err := fetch(c, "secret.txt"); err == nil {
		t.Fatal("non-allowed embedded file served")
	}
}

// TestIPv6: the server on an IPv6 address (an IPv6-only provisioning
// network: EDK2's PXEv6 gets tftp://[addr]/snponly.efi), with options.
func TestIPv6(t *testing.T) {
	data := bytes.Repeat([]byte("v6"), 5000)
	addr, rec := startServer(t, Config{Addr: "[::1]:0", FS: fstest.MapFS{"snponly.efi": {Data: data}}})
	c := client(t, addr)
	c.RequestTSize(true)
	c.SetBlockSize(1432)
	got, tsize, err := fetch(c, "snponly.efi")
	if err != nil || !bytes.Equal(got, data) || tsize != int64(len(data)) {
		t.Fatalf("got %d bytes tsize %d err %v", len(got), tsize, err)
	}
	ev := rec.waitFor(t, 2*time.Second, func(ev boot.Event) bool { return ev.Kind == boot.TFTPServed })
	if ev.MAC != testMAC || !strings.Contains(ev.Detail, "file=snponly.efi bytes=10000") {
		t.Errorf("event %+v", ev)
	}
}

// TestDebianDir serves straight from the ipxe package, whose ipxe.efi is a
// symlink out of the directory (to /boot/ipxe.efi).
func TestDebianDir(t *testing.T) {
	if _, err := os.Stat(filepath.Join(DefaultDir, "undionly.kpxe")); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Debian package ipxe not installed: %v", err)
		}
		t.Skipf("Debian package ipxe not installed: %v", err)
	}
	addr, _ := startServer(t, Config{}) // default Dir and Files
	for _, name := range []string{"undionly.kpxe", "snponly.efi", "ipxe.efi"} {
		want, err := os.ReadFile(filepath.Join(DefaultDir, name))
		if err != nil {
			t.Logf("%s: %v (skipped)", name, err)
			continue
		}
		c := client(t, addr)
		c.SetBlockSize(1468)
		got, _, err := fetch(c, name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: %d bytes, err %v; want %d", name, len(got), err, len(want))
		}
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
	}{
		{"no address", Config{Dir: t.TempDir()}},
		{"missing dir", Config{Addr: "127.0.0.1:0", Dir: "/nonexistent/ipxe"}},
		{"path in allow-list", Config{Addr: "127.0.0.1:0", Dir: t.TempDir(), Files: []string{"../etc/passwd"}}},
		{"dot in allow-list", Config{Addr: "127.0.0.1:0", Dir: t.TempDir(), Files: []string{".."}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.cfg); err == nil {
				t.Fatal("New accepted a bad config")
			}
		})
	}
}

func TestRunBindError(t *testing.T) {
	busy, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	srv, err := New(Config{Addr: busy.LocalAddr().String(), Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Run(ctx); err == nil || ctx.Err() != nil {
		t.Fatalf("Run on a busy port: %v (ctx %v), want an immediate bind error", err, ctx.Err())
	}
}

// TestMeter: a served file counts as ok with its bytes, a refused name as
// refused without its name (clients choose names).
func TestMeter(t *testing.T) {
	dir, files := testFiles(t)
	m := &boot.Tally{}
	addr, _ := startServer(t, Config{Dir: dir, Meter: m})
	if _, _, err := fetch(client(t, addr), "undionly.kpxe"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := fetch(client(t, addr), "../../etc/passwd"); err == nil {
		t.Fatal("../../etc/passwd served")
	}
	if n, b := m.Count("tftp undionly.kpxe ok"), m.Bytes("tftp undionly.kpxe ok"); n != 1 || b != int64(len(files["undionly.kpxe"])) {
		t.Errorf("served: %d transfers, %d bytes; want 1, %d", n, b, len(files["undionly.kpxe"]))
	}
	if n := m.Count("tftp  refused"); n < 2 { // the start-up probe and the traversal
		t.Errorf("refused: %d, want >= 2", n)
	}
}
