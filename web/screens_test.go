package web

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/uuid"

	"castiron/storage"
)

// seed puts a node straight into the store in a given state: a test fixture
// for states the fake driver passes through too fast to look at.
func (s *testServer) seed(name, state string, mut func(n *storage.Node)) string {
	s.t.Helper()
	off := "power off"
	n := &storage.Node{UUID: uuid.NewString(), Name: &name, Driver: "fake-hardware", ProvisionState: state,
		PowerState: &off, CreatedAt: time.Now(), Properties: storage.JSONObject{}, DriverInfo: storage.JSONObject{},
		DriverInternalInfo: storage.JSONObject{}, InstanceInfo: storage.JSONObject{}, Extra: storage.JSONObject{}}
	if mut != nil {
		mut(n)
	}
	if err := s.store.CreateNode(context.Background(), n); err != nil {
		s.t.Fatal(err)
	}
	return n.UUID
}

func strp(s string) *string { return &s }

var inventory = map[string]any{
	"inventory": map[string]any{
		"system_vendor": map[string]any{"manufacturer": "Supermicro", "product_name": "SYS-1029P-WTR", "serial_number": "S349812X"},
		"cpu":           map[string]any{"model_name": "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", "count": 40, "architecture": "x86_64", "frequency": "2100"},
		"memory":        map[string]any{"total": 201326592000, "physical_mb": 196608},
		"boot":          map[string]any{"current_boot_mode": "uefi", "pxe_interface": "52:54:00:12:34:01"},
		"bmc_address":   "10.20.0.11",
		"disks": []any{
			map[string]any{"name": "/dev/sda", "model": "SAMSUNG MZ7LH480", "vendor": "ATA", "size": 480103981056, "rotational": false, "serial": "S45PNA0M1234"},
			map[string]any{"name": "/dev/sdb", "model": "ST4000NM0035", "vendor": "SEAGATE", "size": 4000787030016, "rotational": true, "serial": "ZC1ABCD"},
			map[string]any{"name": "/dev/nvme0n1", "model": "INTEL SSDPE2KX010T8", "size": 1000204886016, "rotational": false, "serial": "PHLJ9123"},
		},
		"interfaces": []any{
			map[string]any{"name": "eno1", "mac_address": "52:54:00:12:34:01", "ipv4_address": "192.0.2.21", "has_carrier": true, "speed_mbps": 10000},
			map[string]any{"name": "eno2", "mac_address": "52:54:00:12:34:02", "has_carrier": false},
		},
	},
	"plugin_data": map[string]any{},
}

func TestBrowserStatesAndInventory(t *testing.T) {
	b := newBrowser(t, 1366, 900)
	s := newServer(t, nil)
	failed := s.seed("db-01", "deploy failed", func(n *storage.Node) {
		n.TargetProvisionState = strp("active")
		n.LastError = strp("Deploy step deploy.write_image failed: image checksum mismatch (expected 8f14e45f, got 0cc175b9)")
	})
	waiting := s.seed("db-02", "clean wait", func(n *storage.Node) {
		n.TargetProvisionState = strp("available")
		n.PowerState = strp("power on")
		n.CleanStep = storage.JSONObject{"interface": "deploy", "step": "erase_devices", "priority": float64(10)}
		n.DriverInternalInfo["progress"] = float64(42)
	})
	inspected := s.seed("web-01", "manageable", func(n *storage.Node) {
		n.Properties = storage.JSONObject{"cpus": float64(40), "memory_mb": float64(196608), "local_gb": float64(446), "cpu_arch": "x86_64"}
		n.DriverInternalInfo["castiron_inventory"] = inventory
	})
	s.expect(http.StatusCreated, "POST", "/v1/ports", map[string]any{"address": "52:54:00:12:34:01", "node_uuid": inspected, "pxe_enabled": true})
	s.seed("web-02", "active", func(n *storage.Node) { n.PowerState = strp("power on") })
	s.seed("web-03", "inspect failed", func(n *storage.Node) { n.LastError = strp("Timeout reached while inspecting the node") })
	s.seed("web-04", "deploying", func(n *storage.Node) { n.TargetProvisionState = strp("active"); n.PowerState = strp("power on") })
	for i := range 6 {
		s.seed(fmt.Sprintf("spare-%02d", i), "available", nil)
	}

	b.sub(t, "state colours and last_error", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/"))
		b.waitJS("rows", `document.querySelectorAll('.vinner .row').length === 12`)
		for id, kind := range map[string]string{failed: "st-failed", waiting: "st-trans", inspected: "st-stable"} {
			var cls string
			b.eval(fmt.Sprintf(`document.querySelector('.row[data-uuid="%s"] .badge').className`, id), &cls)
			if cls != "badge "+kind {
				t.Errorf("%s: badge %q, want %s", id, cls, kind)
			}
		}
		var errText string
		b.eval(fmt.Sprintf(`document.querySelector('.row[data-uuid="%s"] .c-last_error').textContent`, failed), &errText)
		if !strings.Contains(errText, "checksum mismatch") {
			t.Errorf("last_error cell %q", errText)
		}
		// The failed kind filter.
		b.setValue(`#fleet-state`, "kind:failed")
		b.waitJS("failed filter", `document.querySelectorAll('.vinner .row').length === 2`)
		b.setValue(`#fleet-state`, "")
		b.waitJS("all", `document.querySelectorAll('.vinner .row').length === 12`)
		b.screenshot("fleet-states.png")
	})

	b.sub(t, "progress of the current step", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + waiting))
		b.waitJS("progress", `document.querySelector('.progress-box progress') && document.querySelector('.progress-box progress').value === 42`)
		var label string
		b.eval(`document.querySelector('.progress-label').textContent`, &label)
		if !strings.Contains(label, "clean step: deploy.erase_devices") || !strings.Contains(label, "42 %") {
			t.Errorf("progress label %q", label)
		}
		got := actionsOffered(b)
		if !contains(got, "abort") || contains(got, "provide") || contains(got, "manage") || contains(got, "delete") {
			t.Errorf("clean wait offers %v", got)
		}
		b.screenshot("node-progress.png")
	})

	b.sub(t, "failed node offers recovery verbs only", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + failed))
		b.waitJS("actions", `document.querySelectorAll('.actions button').length > 0`)
		got := actionsOffered(b)
		for _, want := range []string{"deploy", "rebuild", "undeploy"} {
			if !contains(got, want) {
				t.Errorf("deploy failed: %q not offered (%v)", want, got)
			}
		}
		for _, bad := range []string{"manage", "provide", "abort", "delete"} {
			if contains(got, bad) {
				t.Errorf("deploy failed: %q offered (%v)", bad, got)
			}
		}
		var alert string
		b.eval(`document.querySelector('.alert').textContent`, &alert)
		if !strings.Contains(alert, "checksum mismatch") {
			t.Errorf("last_error alert %q", alert)
		}
	})

	b.sub(t, "inventory drawn readably", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + inspected))
		b.waitJS("inventory", `document.querySelectorAll('.inventory table').length === 2`)
		var text string
		b.eval(`document.querySelector('.inventory').innerText`, &text)
		for _, want := range []string{"Supermicro SYS-1029P-WTR", "40 × Intel(R) Xeon(R) Gold 6230", "192 GiB", "Disks (3)",
			"/dev/sda", "447 GiB", "SSD", "3.6 TiB", "HDD", "Network interfaces (2)", "52:54:00:12:34:01", "10000 Mb/s", "uefi"} {
			if !strings.Contains(text, want) {
				t.Errorf("inventory lacks %q:\n%s", want, text)
			}
		}
		b.waitJS("ports", `document.querySelector('#c-ports').parentElement.innerText.includes('52:54:00:12:34:01')`)
		b.screenshot("node-inventory.png")
	})
	b.checkErrors()
}

// TestFleetLoadCost measures a cold page load of the fleet view with 1,000
// and 10,000 nodes: time to first rendered rows, time until every node is
// loaded, bytes sent by castiron, and the steady cost of live updates.
// CASTIRON_UI_BENCH=1 runs it (seeding 10,000 nodes takes a while).
func TestFleetLoadCost(t *testing.T) {
	if os.Getenv("CASTIRON_UI_BENCH") == "" {
		t.Skip("set CASTIRON_UI_BENCH=1 to measure page loads with 1,000 and 10,000 nodes")
	}
	for _, count := range []int{1000, 10000} {
		t.Run(strconv.Itoa(count), func(t *testing.T) {
			s := newServer(t, nil)
			states := []string{"available", "active", "manageable", "active", "clean wait", "deploy failed"}
			for i := range count {
				st := states[i%len(states)]
				s.seed(fmt.Sprintf("node-%05d", i), st, func(n *storage.Node) {
					if st == "deploy failed" {
						n.LastError = strp("Deploy step deploy.write_image failed: timeout")
					}
				})
			}
			b := newBrowser(t, 1366, 860)
			// A cold load (fresh browser and profile), then a warm one (the
			// browser already ran; assets revalidate with 304).
			for _, run := range []string{"cold", "warm"} {
				if run == "warm" {
					b.run(chromedp.Navigate("about:blank"))
				}
				s.sent.Store(0)
				s.reqs.Store(0)
				start := time.Now()
				b.run(chromedp.Navigate(s.srv.URL + "/"))
				b.waitJS("first rows", `!!(window.__castiron && window.__castiron.firstRender)`)
				wallFirst := time.Since(start)
				b.waitJS("all nodes", `!!(window.__castiron && window.__castiron.fullyLoaded)`)
				wallAll := time.Since(start)
				var first, all, html float64
				b.eval(`performance.getEntriesByType('navigation')[0].responseEnd`, &html)
				b.eval(`window.__castiron.firstRender`, &first)
				b.eval(`window.__castiron.fullyLoaded`, &all)
				loadBytes, loadReqs := s.sent.Load(), s.reqs.Load()
				var timeline string
				b.eval(`performance.getEntriesByType('navigation').concat(performance.getEntriesByType('resource'), performance.getEntriesByType('mark'), performance.getEntriesByType('paint')).sort((a, b) => a.startTime - b.startTime).map(e => e.name.replace(location.origin, '').slice(0, 60) + ' @' + Math.round(e.startTime) + '+' + Math.round(e.duration) + 'ms').join('\n')`, &timeline)
				t.Logf("%s timeline:\n%s", run, timeline)
				t.Logf("%d nodes, %s load: page HTML at %.0f ms, first rows at %.0f ms (wall %v), all loaded at %.0f ms (wall %v); castiron sent %d KiB in %d requests",
					count, run, html, first, wallFirst.Round(time.Millisecond), all, wallAll.Round(time.Millisecond), loadBytes/1024, loadReqs)
			}
			var shown string
			b.eval(`document.querySelector('.shown').textContent`, &shown)
			if !strings.Contains(shown, strconv.Itoa(count/1000)) {
				t.Errorf("shown %q", shown)
			}
			// Scrolling to the end paints the last rows.
			b.eval(`(() => { const s = document.querySelector('.vscroll'); s.scrollTop = s.scrollHeight; return true })()`, nil)
			b.waitJS("last row", fmt.Sprintf(`[...document.querySelectorAll('.rowlink')].some(a => a.textContent === 'node-%05d')`, count-1))
			var domRows int
			b.eval(`document.querySelectorAll('.vinner .row').length`, &domRows)
			// Live updates while nothing changes: 10 s of polling.
			s.sent.Store(0)
			s.reqs.Store(0)
			time.Sleep(10 * time.Second)
			idleBytes, idleReqs := s.sent.Load(), s.reqs.Load()
			t.Logf("%d nodes: %d rows in the DOM; idle live updates: %d requests, %d KiB per 10 s", count, domRows, idleReqs, idleBytes/1024)
			if domRows > 200 {
				t.Errorf("%d rows in the DOM; the list is not virtualised", domRows)
			}
			b.checkErrors()
		})
	}
}
