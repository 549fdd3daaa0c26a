package steps

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"castiron/ramdisk/agent/steps/blockdev"
	"castiron/ramdisk/protocol"
)

// need skips a test lacking root or a tool, except in CI, where it fails.
func need(t testing.TB, root bool, tools ...string) {
	t.Helper()
	skip := func(why string) {
		if os.Getenv("CI") == "true" {
			t.Fatalf("required in CI: %s", why)
		}
		t.Skip(why)
	}
	if root && os.Geteuid() != 0 {
		skip("needs root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			skip(tool + " not installed")
		}
	}
}

func sh(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// loopDevice attaches a loop device over a new file of size bytes filled
// with fill, and detaches it when the test ends.
func loopDevice(t testing.TB, size int64, fill byte) string {
	t.Helper()
	need(t, true, "losetup")
	f := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(f, bytes.Repeat([]byte{fill}, int(size)), 0o644); err != nil {
		t.Fatal(err)
	}
	dev := strings.TrimSpace(sh(t, "losetup", "--find", "--show", "--partscan", f))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v %s", dev, err, out)
		}
	})
	return dev
}

func readDev(t testing.TB, dev string, off, n int64) []byte {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, n)
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	return b
}

// testImage is a raw disk image: a GPT with two partitions of random and
// patterned data, zeros elsewhere (holes for qcow2).
func testImage(t testing.TB, dir string, size int64, table string) (string, []byte) {
	t.Helper()
	need(t, false, "sgdisk", "sfdisk")
	p := filepath.Join(dir, "image.raw")
	if err := os.WriteFile(p, make([]byte, size), 0o644); err != nil {
		t.Fatal(err)
	}
	switch table {
	case "gpt":
		sh(t, "sgdisk", "-n", "1:2048:+4M", "-t", "1:ef00", "-n", "2:0:+6M", p)
	case "mbr":
		cmd := exec.Command("sfdisk", "--quiet", p)
		cmd.Stdin = strings.NewReader("label: dos\n2048,8192,83\n,12288,83\n")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("sfdisk: %v %s", err, out)
		}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(42, uint64(size)))
	for i := int64(1 << 20); i < 3<<20; i++ {
		b[i] = byte(rng.Uint32())
	}
	for i := int64(6 << 20); i < 9<<20; i++ {
		b[i] = byte(i >> 12)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

// imageServer serves a directory with Range support.
func imageServer(t testing.TB, dir string) *httptest.Server {
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv
}

func inventoryOf(disks ...string) *protocol.Inventory {
	inv := &protocol.Inventory{}
	for _, d := range disks {
		var size int64
		if f, err := os.Open(d); err == nil {
			size, _ = f.Seek(0, 2)
			f.Close()
		}
		inv.Disks = append(inv.Disks, protocol.Disk{Name: d, Size: size})
	}
	return inv
}

// progressLog records progress reports with their time.
type progressLog struct {
	mu      sync.Mutex
	reports []protocol.Progress
	at      []time.Time
}

func (p *progressLog) add(pr protocol.Progress) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reports = append(p.reports, pr)
	p.at = append(p.at, time.Now())
}

func (p *progressLog) last() protocol.Progress {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.reports) == 0 {
		return protocol.Progress{}
	}
	return p.reports[len(p.reports)-1]
}

// checkRate: reports but the last come at most twice a second.
func (p *progressLog) checkRate(t testing.TB) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := 1; i < len(p.at)-1; i++ {
		if d := p.at[i].Sub(p.at[i-1]); d < 450*time.Millisecond {
			t.Errorf("progress reports %d and %d are %v apart", i-1, i, d)
		}
	}
}

func testRunner() *runner {
	r := newRunner()
	r.fetch.RetryDelay = 10 * time.Millisecond
	return r
}

func runStep(t testing.TB, ctx context.Context, r *runner, name string, args map[string]any, inv *protocol.Inventory, p *progressLog) (map[string]any, error) {
	t.Helper()
	fn := func(protocol.Progress) {}
	if p != nil {
		fn = p.add
	}
	return r.run(ctx, protocol.Step{ID: "s1", Interface: "deploy", Name: name, Args: args}, inv, fn)
}

func openForTest(path string) (*blockdev.Device, error) { return blockdev.Open(path) }
