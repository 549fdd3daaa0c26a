package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"golang.org/x/crypto/bcrypt"

	"castiron/httpapi"
	"castiron/httpapi/consoletest"
	"castiron/storage"
)

// terminalBuilt skips (fails under CI) when make web-vendor has not put
// xterm.js into static/vendor.
func terminalBuilt(t *testing.T) {
	t.Helper()
	for _, name := range terminalAssets {
		if _, err := staticFS.Open("static/" + name); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("static/%s is missing: make web-vendor did not run", name)
			}
			t.Skipf("static/%s is missing: run make web-vendor (npm) for the console's terminal", name)
		}
	}
}

func TestConsoleFeatures(t *testing.T) {
	for _, noTerminal := range []bool{true, false} {
		if !noTerminal {
			terminalBuilt(t)
		}
		s := newServerWith(t, nil, serverOpts{noTerminal: noTerminal})
		r := s.do("GET", "/ui/api/features", nil, nil)
		var f features
		if r.status != 200 || json.Unmarshal(r.body, &f) != nil || f.Terminal == noTerminal {
			t.Errorf("noTerminal=%v: %d %s", noTerminal, r.status, r.body)
		}
		if !noTerminal {
			for _, name := range append(terminalAssets, "vendor/xterm.LICENSE.txt", "vendor/addon-fit.LICENSE.txt") {
				if r := s.do("GET", "/ui/"+name, nil, nil); r.status != 200 || len(r.body) == 0 {
					t.Errorf("/ui/%s: %d", name, r.status)
				}
			}
			if r := s.do("GET", "/ui/vendor/xterm.mjs", nil, nil); !strings.HasPrefix(r.header.Get("Content-Type"), "text/javascript") {
				t.Errorf("xterm.mjs served as %q", r.header.Get("Content-Type"))
			}
		}
	}
}

// consoleText is what the terminal shows (xterm's DOM rows).
const consoleText = `(document.querySelector('#panel-console .xterm-rows')||{}).innerText||''`

// TestBrowserConsole opens a node's Console tab against a real castiron
// whose console is consoletest's: the scrollback shows, typed keys reach the
// console and come back, a long paste is cut, and the tab follows the
// console's end.
func TestBrowserConsole(t *testing.T) {
	terminalBuilt(t)
	con := consoletest.New()
	b := newBrowser(t, 1366, 900)
	s := newServerWith(t, nil, serverOpts{console: con})
	id := s.seed("rack1-node07", "active", func(n *storage.Node) { n.ConsoleEnabled = true })
	con.Enable(id)
	con.Print(id, []byte("\x1b[1mcastiron-sim\x1b[0m BIOS 2.4.1 POST ok\r\n[    0.000000] Linux version 6.1.0-28-amd64\r\n"+
		"[    2.314159] eth0: link up, 10000 Mbps\r\n\r\nDebian GNU/Linux 12 rack1-node07 ttyS0\r\n\r\nrack1-node07 login: "))

	// The page's Content-Security-Policy must admit the terminal (its
	// <style> elements, the ws: connection) and nothing it refuses may be
	// missed: every violation is collected from the first script on.
	b.run(chromedp.ActionFunc(func(ctx context.Context) error {
		_, err := page.AddScriptToEvaluateOnNewDocument(`window.__csp = []; document.addEventListener('securitypolicyviolation',
			(e) => window.__csp.push(e.violatedDirective + ' ' + e.blockedURI))`).Do(ctx)
		return err
	}))

	b.sub(t, "scrollback, then typing reaches the console", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + id + "?tab=console"))
		b.waitJS("connected with write", `document.getElementById('panel-console')?.dataset.state === 'connected' && document.getElementById('panel-console')?.dataset.write === 'true'`)
		b.waitJS("scrollback shown", consoleText+`.includes('rack1-node07 login:')`)
		b.run(chromedp.Click(`#panel-console .xterm-screen`, chromedp.ByQuery), typeKeys("root\r"))
		waitTyped(t, con, id, "root\r")
		b.waitJS("echo shown", consoleText+`.includes('login: root')`)
		con.Print(id, []byte("\r\nPassword: "))
		b.waitJS("live output shown", consoleText+`.includes('Password:')`)
		var tabSel string
		b.eval(`document.getElementById('tab-console').getAttribute('aria-selected')`, &tabSel)
		if tabSel != "true" {
			t.Errorf("console tab aria-selected=%q", tabSel)
		}
		var csp []string
		b.eval(`window.__csp`, &csp)
		if len(csp) != 0 {
			t.Errorf("Content-Security-Policy violations: %q", csp)
		}
		b.screenshot("node-console.png")
		var png []byte
		b.run(chromedp.CaptureScreenshot(&png))
		if err := os.MkdirAll(committedScreenshots, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(committedScreenshots, "node-console.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	})

	b.sub(t, "a huge paste is cut to 64 KiB and sent in pieces", func(t *testing.T) {
		before := len(con.Typed(id))
		b.run(chromedp.Evaluate(`(() => { const dt = new DataTransfer(); dt.setData('text/plain', 'y'.repeat(200000));
			document.querySelector('#panel-console .xterm-helper-textarea').dispatchEvent(new ClipboardEvent('paste', { clipboardData: dt, bubbles: true, cancelable: true })); })()`, nil))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := con.Wait(ctx, func() bool { return len(con.Typed(id))-before >= 64<<10 }); err != nil {
			t.Fatalf("paste: %d bytes typed: %v", len(con.Typed(id))-before, err)
		}
		time.Sleep(200 * time.Millisecond)
		if got := con.Typed(id)[before:]; len(got) != 64<<10 || len(bytes.Trim(got, "y")) != 0 {
			t.Errorf("paste typed %d bytes, want 65536 y", len(got))
		}
		b.waitJS("the cut is told", `[...document.querySelectorAll('#toasts *')].some(e => e.textContent.includes('Paste cut to 64 KiB'))`)
		var state string
		b.eval(`document.getElementById('panel-console')?.dataset.state`, &state)
		if state != "connected" {
			t.Errorf("after the paste the console is %q", state)
		}
	})

	b.sub(t, "leaving the tab detaches, coming back attaches again", func(t *testing.T) {
		b.run(chromedp.Click(`#tab-details`, chromedp.ByQuery))
		waitViewers(t, con, id, 0)
		b.run(chromedp.Click(`#tab-console`, chromedp.ByQuery))
		b.waitJS("connected again", `document.getElementById('panel-console')?.dataset.state === 'connected'`)
		b.waitJS("scrollback again", consoleText+`.includes('Password:')`)
		waitViewers(t, con, id, 1)
	})

	b.sub(t, "the console ends: the tab says so", func(t *testing.T) {
		con.Disable(id)
		b.waitJS("closed", `document.getElementById('panel-console')?.dataset.state === 'closed'`)
		var status string
		b.eval(`document.querySelector('#panel-console .console-status').innerText`, &status)
		if !strings.Contains(status, "console closed") || !strings.Contains(status, "Reconnect") {
			t.Errorf("status %q", status)
		}
		// Reconnecting to a console that is gone says why (the plain GET's 400).
		con.Enable(id)
		con.Disable(id)
		b.run(chromedp.Click(`#panel-console .console-status button`, chromedp.ByQuery))
		b.waitJS("refused, with the reason", `document.getElementById('panel-console')?.dataset.state === 'closed' && document.querySelector('#panel-console .console-status').innerText.includes('not enabled')`)
	})
	b.checkErrors()
}

// TestBrowserConsoleReadOnly: a system reader watches the console: the tab
// says read-only, keys typed go nowhere and the socket stays open (a
// read-only viewer that sent anything would be closed by the server).
func TestBrowserConsoleReadOnly(t *testing.T) {
	terminalBuilt(t)
	dir := t.TempDir()
	users := basicUsers(t, dir, map[string]string{"admin": "{roles: [admin, member, reader], scope: system}", "noc": "{roles: [reader], scope: system}"})
	con := consoletest.New()
	b := newBrowser(t, 1366, 900)
	s := newServerWith(t, users, serverOpts{console: con})
	id := s.seed("rack2-node03", "active", func(n *storage.Node) { n.ConsoleEnabled = true })
	con.Enable(id)
	con.Print(id, []byte("rack2-node03 login: "))

	b.run(network.Enable(), network.SetExtraHTTPHeaders(network.Headers{"Authorization": "Basic " + basic("noc", "pw-noc")}))
	b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + id + "?tab=console"))
	b.waitJS("connected read-only", `document.getElementById('panel-console')?.dataset.state === 'connected' && document.getElementById('panel-console')?.dataset.write === 'false'`)
	b.waitJS("scrollback shown", consoleText+`.includes('rack2-node03 login:')`)
	var status string
	b.eval(`document.querySelector('#panel-console .console-status').innerText`, &status)
	if !strings.Contains(status, "Read-only") {
		t.Errorf("status %q", status)
	}
	if att := con.Attaches(id); len(att) != 1 || att[0] {
		t.Errorf("attaches %v, want one read-only", att)
	}
	b.run(chromedp.Click(`#panel-console .xterm-screen`, chromedp.ByQuery), typeKeys("reboot\r"))
	con.Print(id, []byte("\r\nstill here"))
	b.waitJS("output after the keys", consoleText+`.includes('still here')`)
	if typed := con.Typed(id); len(typed) != 0 {
		t.Errorf("a reader typed %q", typed)
	}
	var state string
	b.eval(`document.getElementById('panel-console')?.dataset.state`, &state)
	if state != "connected" {
		t.Errorf("the reader's console is %q after typing, want still connected (nothing sent)", state)
	}
	b.screenshot("node-console-readonly.png")
	b.checkErrors()
}

// TestBrowserConsoleStates: a UI built without make web-vendor says the
// terminal is missing; a node whose console is off says so.
func TestBrowserConsoleStates(t *testing.T) {
	b := newBrowser(t, 1366, 800)
	bare := newServerWith(t, nil, serverOpts{noTerminal: true, console: consoletest.New()})
	id := bare.seed("n1", "active", func(n *storage.Node) { n.ConsoleEnabled = true })
	b.run(chromedp.Navigate(bare.srv.URL + "/#/node/" + id + "?tab=console"))
	b.waitJS("not built", `document.getElementById('panel-console')?.dataset.state === 'unbuilt'`)
	var msg string
	b.eval(`document.getElementById('panel-console').innerText`, &msg)
	if !strings.Contains(msg, "not built into this castiron") || !strings.Contains(msg, "make web-vendor") {
		t.Errorf("message %q", msg)
	}
	b.screenshot("node-console-unbuilt.png")

	if _, err := staticFS.Open("static/vendor/xterm.mjs"); err == nil {
		s := newServerWith(t, nil, serverOpts{console: consoletest.New()})
		off := s.seed("n2", "active", nil)
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + off + "?tab=console"))
		b.waitJS("disabled", `document.getElementById('panel-console')?.dataset.state === 'disabled'`)
		b.eval(`document.getElementById('panel-console').innerText`, &msg)
		if !strings.Contains(msg, "disabled") || !strings.Contains(msg, "Enable console") {
			t.Errorf("message %q", msg)
		}
	}
	b.checkErrors()
}

func waitTyped(t *testing.T, con *consoletest.Console, id, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := con.Wait(ctx, func() bool { return string(con.Typed(id)) == want }); err != nil {
		t.Fatalf("typed %q, want %q", con.Typed(id), want)
	}
}

func waitViewers(t *testing.T, con *consoletest.Console, id string, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := con.Wait(ctx, func() bool { return con.Viewers(id) == want }); err != nil {
		t.Fatalf("%d viewers, want %d", con.Viewers(id), want)
	}
}

// basicUsers is http_basic with a users file: every user's password is
// pw-<user>, roles as given (YAML flow maps).
func basicUsers(t *testing.T, dir string, roles map[string]string) httpapi.Authenticator {
	t.Helper()
	var pw, yml strings.Builder
	for u, r := range roles {
		hash, _ := bcrypt.GenerateFromPassword([]byte("pw-"+u), bcrypt.MinCost)
		pw.WriteString(u + ":" + string(hash) + "\n")
		fmt.Fprintf(&yml, "%s: %s\n", u, r)
	}
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	ht, err := httpapi.LoadHTPasswd(write("htpasswd", pw.String()))
	if err != nil {
		t.Fatal(err)
	}
	users, err := httpapi.LoadBasicUsers(ht, write("users.yaml", yml.String()))
	if err != nil {
		t.Fatal(err)
	}
	return users
}

// typeKeys types s as Chromium's own keyboard does (and Puppeteer): per
// key a keyDown carrying its text, then a keyUp. chromedp.KeyEvent adds a
// separate char event, which xterm.js reads as a second keystroke.
func typeKeys(s string) chromedp.Action {
	return chromedp.ActionFunc(func(ctx context.Context) error {
		for _, r := range s {
			key, code, vk := string(r), "", int64(0)
			switch {
			case r == '\r':
				key, code, vk = "Enter", "Enter", 13
			case r >= 'a' && r <= 'z':
				code, vk = "Key"+strings.ToUpper(string(r)), int64(r-'a'+'A')
			}
			down := input.DispatchKeyEvent(input.KeyDown).WithKey(key).WithCode(code).WithText(string(r)).
				WithUnmodifiedText(string(r)).WithWindowsVirtualKeyCode(vk).WithNativeVirtualKeyCode(vk)
			if err := down.Do(ctx); err != nil {
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
