//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// hostProxy makes castiron's API, which lives in the lab's namespace,
// reachable on the host's loopback for a browser: each connection is
// dialled into the namespace (nsDialer). It closes when the test ends.
func hostProxy(t *testing.T, l *Lab, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dial := nsDialer(l.NS.Path())
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, on bool) {
		mu.Lock()
		defer mu.Unlock()
		if on {
			conns[c] = true
		} else {
			delete(conns, c)
		}
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				up, err := dial(ctx, "tcp", target)
				cancel()
				if err != nil {
					return
				}
				defer up.Close()
				track(c, true)
				track(up, true)
				defer track(c, false)
				defer track(up, false)
				done := make(chan struct{})
				go func() { _, _ = io.Copy(up, c); up.Close(); close(done) }()
				_, _ = io.Copy(c, up)
				c.Close()
				<-done
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return "http://" + ln.Addr().String()
}

// headlessChromium starts Debian's chromium (chromedp); nil when it is not
// installed (outside CI).
func headlessChromium(t *testing.T) context.Context {
	t.Helper()
	exe, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed")
		}
		return nil
	}
	profile := t.TempDir()
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(exe), chromedp.Flag("headless", true), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck, chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("disable-background-networking", true), chromedp.UserDataDir(profile), chromedp.WindowSize(1100, 760))
	ctx, cancelCtx := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelCtx(); cancelAlloc() })
	return ctx
}

// consoleTerminalText is what the UI's terminal shows.
const consoleTerminalText = `(document.querySelector('#panel-console .xterm-rows')||{}).innerText||''`

func waitPage(t *testing.T, ctx context.Context, what, expr string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Run(wctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(100*time.Millisecond))); err != nil {
		var text string
		_ = chromedp.Run(ctx, chromedp.Evaluate(consoleTerminalText, &text))
		t.Fatalf("web console: %s: %v; terminal shows:\n%s", what, err, tailString(text, 1500))
	}
}

// typeInto types s as key events (xterm.js reads keydown/keypress).
func typeInto(s string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for _, r := range s {
			key, code, vk := string(r), "", int64(0)
			switch {
			case r == '\r':
				key, code, vk = "Enter", "Enter", 13
			case r >= 'a' && r <= 'z':
				code, vk = "Key"+strings.ToUpper(string(r)), int64(r-'a'+'A')
			}
			if err := input.DispatchKeyEvent(input.KeyDown).WithKey(key).WithCode(code).WithText(string(r)).
				WithUnmodifiedText(string(r)).WithWindowsVirtualKeyCode(vk).WithNativeVirtualKeyCode(vk).Do(ctx); err != nil {
				return err
			}
			if err := input.DispatchKeyEvent(input.KeyUp).WithKey(key).WithCode(code).WithWindowsVirtualKeyCode(vk).
				WithNativeVirtualKeyCode(vk).Do(ctx); err != nil {
				return err
			}
		}
		return nil
	})
}

// webConsole opens the node's Console tab in headless Chromium while the
// VM sits at iPXE's prompt: the terminal shows the boot output (the
// scrollback), a line typed in the browser runs in iPXE, and its output
// shows in the browser and in socat's stream (one session, two viewers).
// It returns the browser, for the end of the console, or nil when chromium
// or the UI's terminal is missing.
func webConsole(t *testing.T, l *Lab, c *Castiron, node string, socatOut *lockedBuf) context.Context {
	t.Helper()
	ctx := headlessChromium(t)
	if ctx == nil {
		t.Log("chromium not installed: web console step skipped")
		return nil
	}
	var feat struct {
		Terminal bool `json:"terminal"`
	}
	if err := c.Do(ctx, "GET", "/ui/api/features", nil, &feat); err != nil || !feat.Terminal {
		t.Logf("the UI's terminal is not built into this castiron (make web-vendor): web console step skipped (%v)", err)
		return nil
	}
	base := hostProxy(t, l, fmt.Sprintf("%s:%d", ServerIP, CastironPort))
	start := time.Now()
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/#/node/"+node+"?tab=console")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "connected", `document.getElementById('panel-console')?.dataset.state === 'connected' && document.getElementById('panel-console')?.dataset.write === 'true'`)
	waitPage(t, ctx, "boot output from the scrollback", consoleTerminalText+`.includes('iPXE>')`)
	word := "browser" + randHex(3)
	if err := chromedp.Run(ctx, chromedp.Click(`#panel-console .xterm-screen`, chromedp.ByQuery), typeInto("echo "+word+"\r")); err != nil {
		t.Fatal(err)
	}
	waitPage(t, ctx, "the typed command's output", consoleTerminalText+fmt.Sprintf(`.split(%q).length > 2`, word))
	waitOutput(t, socatOut, word, 2, 30*time.Second)
	var png []byte
	if err := chromedp.Run(ctx, chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&png)); err != nil {
		t.Fatal(err)
	}
	// Outside the lab's directory, which its teardown removes.
	shot := filepath.Join(os.TempDir(), "castiron-e2e-web-console.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("web console: typed %q in the browser, echoed in the browser and in socat (%.2fs); screenshot %s (%d bytes)",
		word, time.Since(start).Seconds(), shot, len(png))
	return ctx
}
