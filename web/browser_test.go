package web

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"castiron/storage"
)

// Browser tests drive Debian's chromium, headless, against a real castiron
// (engine + httpapi + this UI, fake-hardware nodes). They skip when chromium
// is missing, except in CI (CI=true), where that is a failure.

const screenshotDir = "testdata/screenshots"

type browser struct {
	t    *testing.T
	ctx  context.Context
	mu   sync.Mutex
	errs []string
}

func chromiumPath(t *testing.T) string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed (apt-get install -y chromium)")
	}
	t.Skip("chromium is not installed; browser tests skipped (apt-get install -y chromium)")
	return ""
}

func newBrowser(t *testing.T, width, height int) *browser {
	t.Helper()
	exe := chromiumPath(t)
	// A fresh profile; removed after chromium's helpers have let go of it
	// (t.TempDir's cleanup races with them).
	profile, err := os.MkdirTemp("", "castiron-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(exe),
		chromedp.Flag("headless", true),
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.Flag("disable-background-networking", true),
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.Flag("lang", "en-US"),
		chromedp.UserDataDir(profile),
		chromedp.WindowSize(width, height),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	// chromedp logs CDP events it does not model (newer Chromium sends
	// dom.topLayerElementsUpdated for <dialog>); keep real errors visible.
	ctx, cancelCtx := chromedp.NewContext(allocCtx, chromedp.WithErrorf(func(format string, args ...any) {
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "unhandled node event") {
			t.Logf("chromedp: %s", msg)
		}
	}))
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	b := &browser{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, func(ev any) {
		b.mu.Lock()
		defer b.mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			b.errs = append(b.errs, "exception: "+ev.ExceptionDetails.Error())
		case *runtime.EventConsoleAPICalled:
			if ev.Type == runtime.APITypeError {
				var parts []string
				for _, a := range ev.Args {
					parts = append(parts, string(a.Value)+a.Description)
				}
				b.errs = append(b.errs, "console.error: "+strings.Join(parts, " "))
			}
		}
	})
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	t.Cleanup(func() {
		cancelTimeout()
		cancelCtx()
		cancelAlloc()
		for i := 0; i < 20 && os.RemoveAll(profile) != nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
	})
	return b
}

// jsErrors fails the test on any uncaught exception or console.error the
// page produced (a 4xx the UI handles shows in the page, not as an error).
func (b *browser) checkErrors() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errs {
		b.t.Errorf("browser: %s", e)
	}
	b.errs = nil
}

func (b *browser) run(actions ...chromedp.Action) {
	b.t.Helper()
	if err := chromedp.Run(b.ctx, actions...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// waitJS polls a JavaScript predicate until it is true.
func (b *browser) waitJS(what, expr string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Poll(expr, nil, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		var page string
		_ = chromedp.Run(b.ctx, chromedp.Evaluate(`document.getElementById('main').innerText.slice(0, 1500)`, &page))
		b.t.Fatalf("waiting for %s (%s): %v\npage: %s", what, expr, err, page)
	}
}

func (b *browser) eval(expr string, out any) {
	b.t.Helper()
	b.run(chromedp.Evaluate(expr, out))
}

func (b *browser) screenshot(name string) {
	b.t.Helper()
	var png []byte
	b.run(chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&png))
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(screenshotDir, name), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

func rowState(uuid string) string {
	return fmt.Sprintf(`(document.querySelector('.row[data-uuid="%s"] .badge')||{}).textContent||''`, uuid)
}

func actionsOffered(b *browser) []string {
	var got []string
	b.eval(`[...document.querySelectorAll('.actions button[data-action]')].map(b => b.dataset.action)`, &got)
	return got
}

func TestBrowserFleetAndNode(t *testing.T) {
	b := newBrowser(t, 1366, 860)
	s := newServer(t, nil)

	enroll := s.createNode("rack1-node01")
	manageable := s.createNode("rack1-node02")
	s.provision(manageable, "manage", "manageable")
	available := s.createNode("rack1-node03")
	s.provision(available, "manage", "manageable")
	s.provision(available, "provide", "available")
	maint := s.createNode("rack2-node01")
	s.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+maint+"/maintenance", map[string]any{"reason": "fan failure"})

	b.sub(t, "fleet lists the nodes", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/"))
		b.waitJS("4 rows", `document.querySelectorAll('.vinner .row').length === 4`)
		var names []string
		b.eval(`[...document.querySelectorAll('.vinner .row .rowlink')].map(a => a.textContent)`, &names)
		if strings.Join(names, ",") != "rack1-node01,rack1-node02,rack1-node03,rack2-node01" {
			t.Errorf("rows %v", names)
		}
		var counts string
		b.eval(`document.querySelector('.counts').innerText`, &counts)
		for _, want := range []string{"4\nall nodes", "2\nenroll", "1\nmanageable", "1\navailable"} {
			if !strings.Contains(counts, want) {
				t.Errorf("counts %q lack %q", counts, want)
			}
		}
		var kinds []string
		b.eval(`[...document.querySelectorAll('.vinner .row .badge')].map(e => e.className)`, &kinds)
		for _, k := range kinds {
			if k != "badge st-stable" {
				t.Errorf("badge class %q, want st-stable for resting nodes", k)
			}
		}
	})

	b.sub(t, "filter and search", func(t *testing.T) {
		b.run(chromedp.SendKeys(`#fleet-q`, "rack2", chromedp.ByQuery))
		b.waitJS("search to leave one row", `document.querySelectorAll('.vinner .row').length === 1`)
		b.setValue(`#fleet-q`, "")
		b.waitJS("all rows back", `document.querySelectorAll('.vinner .row').length === 4`)
		b.run(chromedp.Click(`.counts button.st-stable:nth-child(2)`, chromedp.ByQuery)) // the largest state: enroll
		b.waitJS("state filter", `document.querySelectorAll('.vinner .row').length === 2`)
		var hash string
		b.eval(`location.hash`, &hash)
		if hash != "#/?state=enroll" {
			t.Errorf("hash %q, want the filter in it", hash)
		}
		b.run(chromedp.Click(`.counts button:first-child`, chromedp.ByQuery))
		b.waitJS("all rows back", `document.querySelectorAll('.vinner .row').length === 4`)
	})

	b.sub(t, "a state change made through the API appears without reload", func(t *testing.T) {
		b.eval(`window.__noReload = 42`, nil)
		s.provision(enroll, "manage", "manageable")
		b.waitJS("row to show manageable", rowState(enroll)+` === 'manageable'`)
		var marker int
		b.eval(`window.__noReload`, &marker)
		if marker != 42 {
			t.Fatal("the page reloaded")
		}
		// A node created through the API shows up too.
		s.createNode("rack3-node01")
		b.waitJS("new node row", `[...document.querySelectorAll('.rowlink')].some(a => a.textContent === 'rack3-node01')`)
		b.screenshot("fleet.png")
	})

	b.sub(t, "keyboard moves between rows", func(t *testing.T) {
		b.eval(`document.querySelector('.vinner .row .rowlink').focus()`, nil)
		b.run(chromedp.KeyEvent(kb.ArrowDown))
		var focused string
		b.eval(`document.activeElement.textContent`, &focused)
		if focused != "rack1-node02" {
			t.Errorf("after ArrowDown focus is on %q", focused)
		}
	})

	b.sub(t, "only valid actions are offered", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + available))
		b.waitJS("node page", `document.querySelectorAll('.actions button').length > 0`)
		got := actionsOffered(b)
		for _, want := range []string{"manage", "deploy", "delete", "maintenance on"} {
			if !contains(got, want) {
				t.Errorf("available node: %q not offered (%v)", want, got)
			}
		}
		for _, bad := range []string{"provide", "inspect", "undeploy", "abort", "clean", "maintenance off"} {
			if contains(got, bad) {
				t.Errorf("available node: %q offered (%v)", bad, got)
			}
		}
		b.waitJS("inventory placeholder", `document.querySelector('.inventory').innerText.includes('No inventory yet')`)
		b.waitJS("history", `document.querySelectorAll('.timeline li.ev').length >= 2`)
	})

	b.sub(t, "an action clicked in the UI changes the node", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + manageable))
		b.waitJS("provide button", `!!document.querySelector('.actions button[data-action="provide"]')`)
		b.run(chromedp.Click(`.actions button[data-action="provide"]`, chromedp.ByQuery))
		s.waitState(manageable, "available")
		b.waitJS("badge shows available", `document.querySelector('.node-head .badge').textContent === 'available'`)
		if got := actionsOffered(b); contains(got, "provide") || !contains(got, "deploy") {
			t.Errorf("after provide the actions are %v", got)
		}
	})

	b.sub(t, "deploy with image URL, then undeploy with confirmation", func(t *testing.T) {
		b.run(chromedp.Click(`.actions button[data-action="deploy"]`, chromedp.ByQuery))
		b.waitJS("deploy dialog", `document.getElementById('dialog').open`)
		b.run(chromedp.SendKeys(`#f-image`, "http://127.0.0.1:9/images/ubuntu.qcow2", chromedp.ByQuery),
			chromedp.SendKeys(`#f-checksum`, "0123456789abcdef0123456789abcdef", chromedp.ByQuery),
			chromedp.Click(`#dialog button[type=submit]`, chromedp.ByQuery))
		n := s.waitState(manageable, "active")
		if ii := n["instance_info"].(map[string]any); ii["image_source"] != "http://127.0.0.1:9/images/ubuntu.qcow2" || ii["image_checksum"] != "0123456789abcdef0123456789abcdef" {
			t.Errorf("instance_info %v", ii)
		}
		b.waitJS("badge shows active", `document.querySelector('.node-head .badge').textContent === 'active'`)
		b.screenshot("node-active.png")
		// Undeploy asks first; Cancel leaves the node alone.
		b.run(chromedp.Click(`.actions button[data-action="undeploy"]`, chromedp.ByQuery))
		b.waitJS("confirm dialog", `document.getElementById('dialog').open`)
		b.run(chromedp.Click(`#dialog button[type=button]`, chromedp.ByQuery))
		time.Sleep(300 * time.Millisecond)
		if st := s.node(manageable)["provision_state"]; st != "active" {
			t.Fatalf("cancelled undeploy moved the node to %v", st)
		}
		b.run(chromedp.Click(`.actions button[data-action="undeploy"]`, chromedp.ByQuery))
		b.waitJS("confirm dialog", `document.getElementById('dialog').open`)
		b.run(chromedp.Click(`#dialog button[type=submit]`, chromedp.ByQuery))
		s.waitState(manageable, "available")
	})

	b.sub(t, "a discovered node is marked", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + enroll))
		b.waitJS("node view", `document.querySelector('.node-head .badge') !== null`)
		var marked bool
		b.eval(`document.querySelector('.node-head .discovered') !== null`, &marked)
		if marked {
			t.Fatal("an enrolled node is marked discovered")
		}
		// Only discovery sets the flag (driver_internal_info is read-only in the API).
		if _, err := s.store.UpdateNode(context.Background(), enroll, func(n *storage.Node) (*storage.Event, error) {
			n.DriverInternalInfo["auto_discovered"] = true
			return nil, nil
		}); err != nil {
			t.Fatal(err)
		}
		b.waitJS("discovered mark", `(document.querySelector('.node-head .discovered')||{}).textContent === 'discovered'`)
	})

	b.sub(t, "errors show Ironic's message", func(t *testing.T) {
		// Deploy is valid in "available" but engine refuses it in maintenance.
		s.expect(http.StatusAccepted, "PUT", "/v1/nodes/"+available+"/maintenance", map[string]any{"reason": "test"})
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + available))
		b.waitJS("maintenance badge", `document.querySelector('.node-head .maint') !== null`)
		b.run(chromedp.Click(`.actions button[data-action="deploy"]`, chromedp.ByQuery))
		b.waitJS("deploy dialog", `document.getElementById('dialog').open`)
		b.run(chromedp.SendKeys(`#f-image`, "http://127.0.0.1:9/img.raw", chromedp.ByQuery),
			chromedp.Click(`#dialog button[type=submit]`, chromedp.ByQuery))
		b.waitJS("error toast", `[...document.querySelectorAll('.toast-error')].some(t => t.textContent.includes("can't be performed on node `+available+` because it's in maintenance mode"))`)
		b.screenshot("node-error.png")
	})

	b.sub(t, "bulk maintenance off on a selection", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/"))
		b.waitJS("rows", `document.querySelectorAll('.vinner .row').length === 5`)
		b.run(chromedp.Click(`.row.head input[type=checkbox]`, chromedp.ByQuery))
		b.waitJS("bulk bar", `!document.querySelector('.bulk').hidden`)
		b.setValue(`#bulk-action`, "maintenance off")
		b.run(chromedp.Click(`#bulk-apply`, chromedp.ByQuery))
		b.waitJS("done toast", `[...document.querySelectorAll('.toast')].some(t => t.textContent.includes('2 node(s) accepted'))`)
		for _, id := range []string{maint, available} {
			if m := s.node(id)["maintenance"]; m != false {
				t.Errorf("node %s maintenance %v after bulk off", id, m)
			}
		}
	})

	b.sub(t, "conductor view", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/conductors"))
		b.waitJS("conductor card", `document.querySelector('.cond') && document.querySelector('.cond').innerText.includes('alive') && document.querySelector('.cond').innerText.includes('fake-hardware')`)
		var text string
		b.eval(`document.querySelector('.cond').innerText`, &text)
		if !strings.Contains(text, "test-conductor") || !strings.Contains(text, "Last heartbeat") {
			t.Errorf("conductor card: %q", text)
		}
		b.waitJS("node count", `document.querySelector('.cond').innerText.includes('show in the node list')`)
		b.screenshot("conductors.png")
	})

	b.sub(t, "instackenv import validates then creates", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/import"))
		b.waitJS("import page", `!!document.getElementById('import-text')`)
		bad := `{"nodes": [
		  {"name": "imp-0", "pm_type": "fake", "mac": ["52:54:00:aa:00:01"]},
		  {"name": "imp-0", "pm_type": "ipmi", "mac": ["52:54:00:AA:00:01", "zz"]},
		  {"name": "rack1-node01", "pm_type": "nosuch"}]}`
		b.setValue(`#import-text`, bad)
		b.run(chromedp.Click(`#import-check`, chromedp.ByQuery))
		b.waitJS("problems", `(document.getElementById('import-summary')||{}).textContent?.includes('problem')`)
		var text string
		b.eval(`document.querySelector('.import-result').innerText`, &text)
		for _, want := range []string{`duplicate name "imp-0"`, "duplicate MAC 52:54:00:aa:00:01", `"zz" is not a MAC address`,
			"pm_addr is required for IPMI", `a node named "rack1-node01" already exists`, `driver "nosuch" is not enabled`} {
			if !strings.Contains(text, want) {
				t.Errorf("import errors lack %q:\n%s", want, text)
			}
		}
		if b.exists(`#import-create`) {
			t.Error("Create offered for an invalid file")
		}
		b.screenshot("import-errors.png")
		good := `{"nodes": [
		  {"name": "imp-0", "pm_type": "fake", "mac": ["52:54:00:aa:00:01"], "cpu": "4", "memory": "8192", "disk": "100", "arch": "x86_64"},
		  {"name": "imp-1", "pm_type": "fake", "mac": ["52:54:00:aa:00:02"]}]}`
		b.setValue(`#import-text`, good)
		b.run(chromedp.Click(`#import-check`, chromedp.ByQuery))
		b.waitJS("ready", `!!document.getElementById('import-create')`)
		b.run(chromedp.Click(`#import-create`, chromedp.ByQuery))
		b.waitJS("done", `(document.getElementById('import-done')||{}).textContent?.includes('2 created, 0 failed')`)
		n := s.node("imp-0")
		if p := n["properties"].(map[string]any); p["cpus"] != float64(4) || p["memory_mb"] != float64(8192) || p["cpu_arch"] != "x86_64" {
			t.Errorf("imported properties %v", p)
		}
		ports := s.expect(http.StatusOK, "GET", "/v1/ports?node="+n["uuid"].(string), nil)["ports"].([]any)
		if len(ports) != 1 || ports[0].(map[string]any)["address"] != "52:54:00:aa:00:01" {
			t.Errorf("imported ports %v", ports)
		}
		// The same file again: every name and MAC is now taken.
		b.run(chromedp.Click(`#import-check`, chromedp.ByQuery))
		b.waitJS("duplicates against castiron", `document.querySelector('.import-result').innerText.includes('MAC 52:54:00:aa:00:02 already belongs to a port of node imp-1')`)
	})

	b.sub(t, "instackenv import maps redfish nodes", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/import"))
		b.waitJS("import page", `!!document.getElementById('import-text')`)
		doc := `{"nodes": [
		  {"name": "rf-imp-0", "pm_type": "redfish", "pm_addr": "10.0.0.7", "pm_port": 8000, "pm_user": "admin",
		   "pm_password": "pw", "pm_system_id": "/redfish/v1/Systems/1", "redfish_verify_ca": false},
		  {"name": "rf-imp-1", "pm_type": "pxe_redfish", "pm_addr": "https://bmc1.example.com", "pm_user": "root",
		   "pm_password": "calvin", "mac": ["52:54:00:aa:00:21"]}]}`
		b.setValue(`#import-text`, doc)
		b.run(chromedp.Click(`#import-check`, chromedp.ByQuery))
		b.waitJS("ready", `!!document.getElementById('import-create')`)
		var text string
		b.eval(`document.querySelector('.import-result').innerText`, &text)
		for _, want := range []string{"10.0.0.7:8000", "https://bmc1.example.com", "inspect the node (out of band)"} {
			if !strings.Contains(text, want) {
				t.Errorf("import table lacks %q:\n%s", want, text)
			}
		}
		b.run(chromedp.Click(`#import-create`, chromedp.ByQuery))
		b.waitJS("done", `(document.getElementById('import-done')||{}).textContent?.includes('2 created, 0 failed')`)
		n := s.node("rf-imp-0")
		di := n["driver_info"].(map[string]any)
		if n["driver"] != "redfish" || di["redfish_address"] != "10.0.0.7:8000" || di["redfish_username"] != "admin" ||
			di["redfish_system_id"] != "/redfish/v1/Systems/1" || di["redfish_verify_ca"] != false || di["redfish_password"] != "******" {
			t.Errorf("imported redfish node: %v %v", n["driver"], di)
		}
		if n1 := s.node("rf-imp-1"); n1["driver"] != "redfish" || n1["power_interface"] != "redfish" || n1["inspect_interface"] != "redfish" {
			t.Errorf("pxe_redfish: %v power %v inspect %v", n1["driver"], n1["power_interface"], n1["inspect_interface"])
		}
		b.screenshot("import-redfish.png")
	})

	b.sub(t, "delete removes the node", func(t *testing.T) {
		imp1 := s.node("imp-1")["uuid"].(string)
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + imp1))
		b.waitJS("delete button", `!!document.querySelector('.actions button[data-action="delete"]')`)
		b.run(chromedp.Click(`.actions button[data-action="delete"]`, chromedp.ByQuery))
		b.waitJS("confirm", `document.getElementById('dialog').open`)
		b.run(chromedp.Click(`#dialog button[type=submit]`, chromedp.ByQuery))
		b.waitJS("back on the fleet", `location.hash.startsWith('#/') && !location.hash.includes('node') && !!document.querySelector('.vinner .row')`)
		if r := s.do("GET", "/v1/nodes/"+imp1, nil, nil); r.status != http.StatusNotFound {
			t.Errorf("deleted node: GET %d", r.status)
		}
	})

	b.sub(t, "secrets are masked on the node page", func(t *testing.T) {
		const secret = "s3cr3t-ui-value"
		n := s.expect(http.StatusCreated, "POST", "/v1/nodes", map[string]any{"name": "masked-ui", "driver": "fake-hardware",
			"driver_info":   map[string]any{"ipmi_password": secret, "fake_key": "shown-value"},
			"instance_info": map[string]any{"configdrive": secret, "image_source": "http://img"}})
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + n["uuid"].(string)))
		b.waitJS("driver info card", `(document.querySelector('.c-dinfo') || document.body).innerText.includes('shown-value')`)
		var page string
		b.eval(`document.documentElement.outerHTML`, &page)
		if strings.Contains(page, secret) || !strings.Contains(page, "******") {
			t.Errorf("node page shows the secret or no mask")
		}
	})
	b.checkErrors()
}

// sub runs a subtest whose failures the browser helpers report.
func (b *browser) sub(t *testing.T, name string, fn func(t *testing.T)) {
	parent := b.t
	t.Run(name, func(t *testing.T) {
		b.t = t
		defer func() { b.t = parent }()
		fn(t)
	})
}

// setValue sets a form field's value and fires input/change, as typing does.
func (b *browser) setValue(sel, v string) {
	b.t.Helper()
	b.eval(fmt.Sprintf(`(() => { const e = document.querySelector(%q); e.value = %q; e.dispatchEvent(new Event('input', {bubbles: true})); e.dispatchEvent(new Event('change', {bubbles: true})); return true })()`, sel, v), nil)
}

func (b *browser) exists(sel string) bool {
	var ok bool
	b.eval(fmt.Sprintf(`!!document.querySelector(%q)`, sel), &ok)
	return ok
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// TestBrowserPhone renders the fleet and a node on a phone-sized screen.
func TestBrowserPhone(t *testing.T) {
	b := newBrowser(t, 390, 844)
	s := newServer(t, nil)
	var first string
	for i := range 12 {
		id := s.createNode(fmt.Sprintf("edge-%02d", i))
		if i == 0 {
			first = id
		}
		if i%3 == 1 {
			s.provision(id, "manage", "manageable")
		}
	}
	b.run(chromedp.Navigate(s.srv.URL + "/"))
	b.waitJS("rows", `document.querySelectorAll('.vinner .row').length >= 8`)
	var rowH float64
	b.eval(`document.querySelector('.vinner .row').getBoundingClientRect().height`, &rowH)
	if rowH < 70 {
		t.Errorf("phone rows are %.0f px high, want the 3-line card layout", rowH)
	}
	var overflow bool
	b.eval(`document.documentElement.scrollWidth > window.innerWidth`, &overflow)
	if overflow {
		t.Error("the fleet page scrolls sideways on a phone")
	}
	b.screenshot("fleet-phone.png")
	b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + first))
	b.waitJS("node page", `document.querySelectorAll('.actions button').length > 0`)
	b.eval(`document.documentElement.scrollWidth > window.innerWidth`, &overflow)
	if overflow {
		t.Error("the node page scrolls sideways on a phone")
	}
	b.screenshot("node-phone.png")
	b.checkErrors()
}
