package appliance

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"castiron/engine/driver/bmcsim/rack"
)

func TestDemoLoopbackOnly(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:6385", "10.1.2.3:6385", ":6385", "[::]:6385", "example.com:6385", "nonsense"} {
		err := runDemo(context.Background(), demoConfig{n: 1, listen: listen, dataDir: t.TempDir(), out: io.Discard})
		if err == nil || !strings.Contains(err.Error(), "--listen") {
			t.Errorf("listen %q: %v, want a refusal", listen, err)
		}
	}
}

// startDemo runs the demo in-process (what `castiron demo` runs) with n
// machines, none deployed, and returns its URL, nodes and image checksum
// once the nodes are enrolled.
func startDemo(t *testing.T, n int) (string, map[string]*rack.Machine, string) {
	t.Helper()
	dir := t.TempDir()
	type ready struct {
		url   string
		nodes map[string]*rack.Machine
	}
	got := make(chan ready, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, demoConfig{n: n, deploy: 0, listen: "127.0.0.1:0", dataDir: dir, bootDelay: 100 * time.Millisecond,
			latency: time.Millisecond, logLevel: "debug", out: io.Discard,
			ready: func(url string, nodes map[string]*rack.Machine) { got <- ready{url, nodes} }})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("demo: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("demo did not stop within 30 s")
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "castiron.log"))
			t.Logf("castiron.log (end):\n%s", tail(b, 8000))
		}
	})
	var r ready
	select {
	case r = <-got:
	case err := <-done:
		t.Fatalf("demo ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not enroll its nodes within 30 s")
	}
	img, err := os.ReadFile(filepath.Join(dir, "images", demoImage))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(img)
	return r.url, r.nodes, hex.EncodeToString(sum[:])
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// TestDemoBrowser: the demo brings its nodes to available by itself; one
// is deployed through the API and shows up active in the web UI's fleet
// list, in headless Chromium (screenshot in testdata/screenshots).
func TestDemoBrowser(t *testing.T) {
	exe := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			exe = p
			break
		}
	}
	if exe == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed")
		}
		t.Skip("chromium is not installed")
	}
	url, nodes, sum := startDemo(t, 4)
	cl := &rack.Client{URL: url, Poll: 100 * time.Millisecond, Timeout: time.Minute}
	ctx := context.Background()
	var first string
	for id, m := range nodes {
		if err := cl.Wait(ctx, id, "available"); err != nil {
			t.Fatalf("%s: %v\nconsole:\n%s", m.Name, err, m.Console.Scrollback())
		}
		if first == "" || m.Name < nodes[first].Name {
			first = id
		}
	}
	if err := cl.Deploy(ctx, first, demoImage, sum); err != nil {
		t.Fatalf("deploy %s: %v\nconsole:\n%s", nodes[first].Name, err, nodes[first].Console.Scrollback())
	}

	profile := t.TempDir()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, chromedp.ExecPath(exe), chromedp.Flag("headless", true),
		chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.UserDataDir(profile), chromedp.WindowSize(1366, 800))
	defer cancelAlloc()
	bctx, cancelB := chromedp.NewContext(alloc)
	defer cancelB()
	bctx, cancelT := context.WithTimeout(bctx, time.Minute)
	defer cancelT()
	badge := func(id string) string {
		return fmt.Sprintf(`(document.querySelector('.row[data-uuid="%s"] .badge')||{}).textContent||''`, id)
	}
	var png []byte
	var names []string
	err := chromedp.Run(bctx,
		chromedp.Navigate(url+"/"),
		chromedp.Poll(fmt.Sprintf(`document.querySelectorAll('.vinner .row').length === %d`, len(nodes)), nil, chromedp.WithPollingInterval(50*time.Millisecond)),
		chromedp.Poll(badge(first)+` === 'active'`, nil, chromedp.WithPollingInterval(50*time.Millisecond)),
		chromedp.Evaluate(`[...document.querySelectorAll('.vinner .row .rowlink')].map(a => a.textContent)`, &names),
		chromedp.Sleep(300*time.Millisecond),
		chromedp.CaptureScreenshot(&png),
	)
	if err != nil {
		t.Fatalf("browser: %v", err)
	}
	if len(names) != len(nodes) || !strings.HasPrefix(strings.Join(names, ","), "rack-") {
		t.Errorf("fleet rows %v", names)
	}
	for id, m := range nodes {
		var state string
		if err := chromedp.Run(bctx, chromedp.Evaluate(badge(id), &state)); err != nil {
			t.Fatal(err)
		}
		want := "available"
		if id == first {
			want = "active"
		}
		if state != want {
			t.Errorf("%s shows %q in the fleet list, want %q", m.Name, state, want)
		}
	}
	if err := os.MkdirAll("testdata/screenshots", 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile("testdata/screenshots/demo-fleet.png", png, 0o644); err != nil {
		t.Fatal(err)
	}
	// The deployed machine booted its OS from disk.
	m := nodes[first]
	deadline := time.Now().Add(10 * time.Second)
	for m.State() != rack.StateOS && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if m.State() != rack.StateOS {
		t.Errorf("%s is %q after deploy, want %q", m.Name, m.State(), rack.StateOS)
	}
}
