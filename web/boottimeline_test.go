package web

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"castiron/pxe/boot"
	"castiron/storage"
)

// committedScreenshots is where the screenshots the README shows live:
// rewritten only with UPDATE_SCREENSHOTS=1 (a PNG of the same page differs
// by a few bytes from run to run, and a test run should leave the checkout
// clean); otherwise they go with the others to the ignored testdata.
var committedScreenshots = func() string {
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		return "screenshots"
	}
	return screenshotDir
}()

// recordedBoot is testdata/boot-timeline.json: a node's boot timeline as
// GET /v1/nodes/{id}/boot_timeline answers it and the power events of its
// history (provenance in the file).
type recordedBoot struct {
	Provenance   []string `json:"provenance"`
	NodeUUID     string   `json:"node_uuid"`
	MAC          string   `json:"mac"`
	BootTimeline struct {
		Events []struct {
			At       string  `json:"at"`
			MAC      string  `json:"mac"`
			NodeUUID *string `json:"node_uuid"`
			Event    string  `json:"event"`
			Detail   string  `json:"detail"`
		} `json:"events"`
	} `json:"boot_timeline"`
	History []struct {
		CreatedAt string `json:"created_at"`
		EventType string `json:"event_type"`
		Severity  string `json:"severity"`
		Event     string `json:"event"`
		User      string `json:"user"`
		Conductor string `json:"conductor"`
	} `json:"history"`
}

// recorderKinds are pxe/boot's event kinds: the fixture may use no other.
var recorderKinds = []string{boot.DHCPDiscover, boot.DHCPOffer, boot.DHCPRequest, boot.DHCPAck, boot.DHCPNak, boot.DHCPIgnored,
	boot.DHCPExhausted, boot.TFTPServed, boot.TFTPRefused, boot.HTTPScript, boot.HTTPKernel, boot.HTTPInitramfs, boot.HTTPLoader,
	boot.HTTPISO, boot.AgentLookup, boot.AgentInspect, boot.AgentBeat}

// phaseNames are the UI's names of the phases, by event kind.
var phaseNames = map[string]string{
	"power_on": "Power on", "power_off": "Power off",
	boot.DHCPDiscover: "DHCP", boot.DHCPOffer: "DHCP", boot.DHCPRequest: "DHCP", boot.DHCPAck: "DHCP", boot.DHCPNak: "DHCP",
	boot.TFTPServed: "TFTP", boot.TFTPRefused: "TFTP", boot.HTTPScript: "iPXE script", boot.HTTPKernel: "Kernel",
	boot.HTTPInitramfs: "Initramfs", boot.AgentLookup: "Agent lookup", boot.AgentBeat: "Heartbeats", boot.AgentInspect: "Inventory",
}

type oracleEvent struct {
	at   time.Time
	kind string
	dur  time.Duration // a transfer's duration= (it ends at at)
}

// expectedBoot is what the view must show for one boot: its phases and the
// gaps between them in order ("gap" for a gap), and which one is slowest.
type expectedBoot struct {
	items   []string
	slowest int
}

var durationRe = regexp.MustCompile(`\bduration=(\S+)`)

// expectBoots cuts the events into boots at each power on and names the
// phases, the gaps over 1 s and 2 % of the boot, and the slowest of them:
// worked out here from the recording, independently of the page's script.
func expectBoots(t *testing.T, evs []oracleEvent) []expectedBoot {
	sort.SliceStable(evs, func(i, j int) bool { return evs[i].at.Before(evs[j].at) })
	var boots [][]oracleEvent
	for _, e := range evs {
		if e.kind == "power_on" || len(boots) == 0 {
			boots = append(boots, nil)
		}
		boots[len(boots)-1] = append(boots[len(boots)-1], e)
	}
	var out []expectedBoot
	for _, b := range boots {
		type seg struct {
			name       string
			start, end time.Time
		}
		var phases []seg
		for _, e := range b {
			name, ok := phaseNames[e.kind]
			if !ok {
				t.Fatalf("no phase for %q", e.kind)
			}
			start := e.at.Add(-e.dur)
			if n := len(phases); n > 0 && phases[n-1].name == name {
				if start.Before(phases[n-1].start) {
					phases[n-1].start = start
				}
				phases[n-1].end = later(phases[n-1].end, e.at)
				continue
			}
			phases = append(phases, seg{name, start, e.at})
		}
		total := phases[len(phases)-1].end.Sub(phases[0].start)
		var segs []seg
		prevEnd := phases[0].end
		for i, p := range phases {
			if gap := p.start.Sub(prevEnd); i > 0 && gap > time.Second && float64(gap) > 0.02*float64(total) {
				segs = append(segs, seg{"gap", prevEnd, p.start})
			}
			segs = append(segs, p)
			prevEnd = later(prevEnd, p.end)
		}
		eb := expectedBoot{}
		for i, s := range segs {
			eb.items = append(eb.items, s.name)
			if s.end.Sub(s.start) > segs[eb.slowest].end.Sub(segs[eb.slowest].start) {
				eb.slowest = i
			}
		}
		out = append(out, eb)
	}
	return out
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// loadRecordedBoot stores the recorded boot for a node named name, its
// times shifted so that the last event is a minute old, and returns what
// the view must show.
func loadRecordedBoot(t *testing.T, s *testServer, name string) (string, []expectedBoot) {
	t.Helper()
	raw, err := os.ReadFile("testdata/boot-timeline.json")
	if err != nil {
		t.Fatal(err)
	}
	var rec recordedBoot
	if err := json.Unmarshal(raw, &rec); err != nil {
		t.Fatal(err)
	}
	if len(rec.Provenance) == 0 {
		t.Fatal("testdata/boot-timeline.json says nowhere where it comes from")
	}
	parse := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	var last time.Time
	for _, e := range rec.BootTimeline.Events {
		last = later(last, parse(e.At))
	}
	for _, h := range rec.History {
		last = later(last, parse(h.CreatedAt))
	}
	shift := time.Now().Add(-time.Minute).Sub(last)

	ctx := context.Background()
	id := s.seed(name, "clean wait", func(n *storage.Node) {
		n.UUID = rec.NodeUUID
		n.TargetProvisionState = strp("available")
	})
	s.expect(http.StatusCreated, "POST", "/v1/ports", map[string]any{"address": rec.MAC, "node_uuid": id, "pxe_enabled": true})
	var rows []storage.BootEvent
	var oracle []oracleEvent
	for _, e := range rec.BootTimeline.Events {
		if !slices.Contains(recorderKinds, e.Event) {
			t.Fatalf("recorded event %q is not one of pxe/boot's kinds", e.Event)
		}
		ev := storage.BootEvent{At: parse(e.At).Add(shift), MAC: e.MAC, Kind: e.Event, Detail: e.Detail}
		if e.NodeUUID != nil {
			ev.NodeUUID = *e.NodeUUID
		}
		rows = append(rows, ev)
		oe := oracleEvent{at: ev.At, kind: e.Event}
		if m := durationRe.FindStringSubmatch(e.Detail); m != nil {
			if oe.dur, err = time.ParseDuration(m[1]); err != nil {
				t.Fatalf("duration in %q: %v", e.Detail, err)
			}
		}
		oracle = append(oracle, oe)
	}
	if err := s.store.AddBootEvents(ctx, rows); err != nil {
		t.Fatal(err)
	}
	for _, h := range rec.History {
		ev := &storage.Event{NodeUUID: id, CreatedAt: parse(h.CreatedAt).Add(shift), EventType: h.EventType, Severity: h.Severity,
			Event: h.Event, User: h.User, Conductor: h.Conductor}
		if err := s.store.AddEvent(ctx, ev); err != nil {
			t.Fatal(err)
		}
		kind := "power_off"
		if strings.HasSuffix(h.Event, "power on") {
			kind = "power_on"
		}
		oracle = append(oracle, oracleEvent{at: ev.CreatedAt, kind: kind})
	}
	return id, expectBoots(t, oracle)
}

// TestBrowserBootTimeline opens a node's boot timeline drawn from a recorded
// boot served by a real castiron, and sorts the fleet by name and by boot step.
func TestBrowserBootTimeline(t *testing.T) {
	b := newBrowser(t, 1366, 1100)
	s := newServer(t, nil)
	// Created out of name order: the fleet must not list creation order.
	r10 := s.seed("rack-10", "clean wait", nil)
	r2 := s.seed("rack-2", "deploying", nil)
	s.seed("rack-1", "available", nil)
	id, want := loadRecordedBoot(t, s, "rack-3")
	if len(want) != 2 {
		t.Fatalf("the recording holds %d boots, want 2", len(want))
	}
	now := time.Now()
	if err := s.store.AddBootEvents(context.Background(), []storage.BootEvent{
		{At: now, MAC: "52:54:00:aa:10:10", NodeUUID: r10, Kind: boot.DHCPOffer, Detail: "ip=10.205.0.110 arch=0 ipxe=false file=undionly.kpxe"},
		{At: now, NodeUUID: r2, Kind: boot.AgentBeat, Detail: "run_step (step write_image running)"},
	}); err != nil {
		t.Fatal(err)
	}

	b.sub(t, "every phase in order, the slowest named", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/node/" + id + "?tab=boot"))
		b.waitJS("two boots drawn", `document.querySelectorAll('.bt-boot').length === 2`)
		for i, w := range want {
			n := i + 1
			var items []string
			b.eval(fmt.Sprintf(`[...document.querySelectorAll('.bt-boot[data-boot="%d"] .bt-phase')].map(li => li.dataset.phase || 'gap')`, n), &items)
			if !slices.Equal(items, w.items) {
				t.Errorf("boot %d shows %v\nwant %v", n, items, w.items)
			}
			var slowest struct {
				Index int    `json:"index"`
				Item  string `json:"item"`
				Named string `json:"named"`
				Segs  int    `json:"segs"`
				Lit   int    `json:"lit"`
			}
			b.eval(fmt.Sprintf(`(() => { const box = document.querySelector('.bt-boot[data-boot="%d"]');
				const lis = [...box.querySelectorAll('.bt-phase')]; const i = lis.findIndex(li => li.classList.contains('slowest'));
				return { index: i, item: i < 0 ? '' : lis[i].querySelector('.bt-pname').textContent,
					named: box.querySelector('.bt-slowest-name').textContent, segs: box.querySelectorAll('.bt-track .bt-seg').length,
					lit: box.querySelectorAll('.bt-track .bt-slowest').length }; })()`, n), &slowest)
			if slowest.Index != w.slowest || slowest.Named != slowest.Item || slowest.Segs != len(w.items) || slowest.Lit != 1 {
				t.Errorf("boot %d: slowest is item %d %q, named %q, %d segments drawn, %d outlined; want item %d (%s) of %d, one outlined",
					n, slowest.Index, slowest.Item, slowest.Named, slowest.Segs, slowest.Lit, w.slowest, w.items[w.slowest], len(w.items))
			}
		}
		// EDK2's aborted TFTP size query, then the file: one retry, one failure.
		var tftp string
		b.eval(`document.querySelector('.bt-boot[data-boot="1"] .bt-phase[data-phase="TFTP"]').innerText`, &tftp)
		if !strings.Contains(tftp, "retried ×1") || !strings.Contains(tftp, "1 failed") || !strings.Contains(tftp, "170 KiB") {
			t.Errorf("boot 1 TFTP phase %q: want the retry, the failure and the size", tftp)
		}
		var kernel string
		b.eval(`document.querySelector('.bt-boot[data-boot="1"] .bt-phase[data-phase="Kernel"]').innerText`, &kernel)
		if !strings.Contains(kernel, "7.9 MiB") || !strings.Contains(kernel, "2.52 s") {
			t.Errorf("boot 1 kernel phase %q: want its size and duration", kernel)
		}
		var hash string
		b.eval(`location.hash`, &hash)
		if hash != "#/node/"+id+"?tab=boot" {
			t.Errorf("hash %q", hash)
		}
		if err := os.MkdirAll(committedScreenshots, 0o755); err != nil {
			t.Fatal(err)
		}
		var png []byte
		b.run(chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&png))
		if err := os.WriteFile(filepath.Join(committedScreenshots, "node-boot-timeline.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	})

	b.sub(t, "the details tab is still there", func(t *testing.T) {
		b.run(chromedp.Click(`#tab-details`, chromedp.ByQuery))
		b.waitJS("details shown", `!document.getElementById('panel-details').hidden && document.getElementById('panel-boot').hidden`)
		var hash string
		b.eval(`location.hash`, &hash)
		if hash != "#/node/"+id {
			t.Errorf("hash %q after the details tab", hash)
		}
	})

	names := func() []string {
		var got []string
		b.eval(`[...document.querySelectorAll('.vinner .row')].sort((a, b) => a.dataset.i - b.dataset.i).map(r => r.querySelector('.rowlink').textContent)`, &got)
		return got
	}
	b.sub(t, "fleet sorted by name by default, then by boot step", func(t *testing.T) {
		b.run(chromedp.Navigate(s.srv.URL + "/#/"))
		b.waitJS("4 rows with boot steps", `document.querySelectorAll('.vinner .row').length === 4 && document.querySelectorAll('.vinner .c-boot[data-event]').length === 3`)
		if got := names(); !slices.Equal(got, []string{"rack-1", "rack-2", "rack-3", "rack-10"}) {
			t.Errorf("default order %v, want by name", got)
		}
		var cell string
		b.eval(fmt.Sprintf(`document.querySelector('.row[data-uuid="%s"] .c-boot').textContent`, r10), &cell)
		if !strings.HasPrefix(cell, "dhcp offer") {
			t.Errorf("rack-10's boot cell %q", cell)
		}
		b.run(chromedp.Click(`.row.head .c-boot button`, chromedp.ByQuery))
		b.waitJS("sorted by boot step", `document.querySelector('.row.head .c-boot').getAttribute('aria-sort') === 'ascending'`)
		// By where the boot is (DHCP before the agent), then by time; no boot last.
		if got := names(); !slices.Equal(got, []string{"rack-10", "rack-3", "rack-2", "rack-1"}) {
			t.Errorf("by boot step %v", got)
		}
		var hash string
		b.eval(`location.hash`, &hash)
		if hash != "#/?sort=boot" {
			t.Errorf("hash %q", hash)
		}
		b.run(chromedp.Click(`.row.head .c-boot button`, chromedp.ByQuery))
		b.waitJS("descending", `document.querySelector('.row.head .c-boot').getAttribute('aria-sort') === 'descending'`)
		if got := names(); !slices.Equal(got, []string{"rack-1", "rack-2", "rack-3", "rack-10"}) {
			t.Errorf("by boot step, descending %v", got)
		}
		b.run(chromedp.Click(`.row.head .c-name button`, chromedp.ByQuery))
		b.waitJS("by name", `document.querySelector('.row.head .c-name').getAttribute('aria-sort') === 'ascending'`)
		if got := names(); !slices.Equal(got, []string{"rack-1", "rack-2", "rack-3", "rack-10"}) {
			t.Errorf("by name again %v", got)
		}
		b.eval(`location.hash`, &hash)
		if hash != "#/" {
			t.Errorf("hash %q for the default sort", hash)
		}
		var png []byte
		b.run(chromedp.Sleep(300*time.Millisecond), chromedp.CaptureScreenshot(&png))
		if err := os.WriteFile(filepath.Join(committedScreenshots, "fleet-boot-column.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	})
	b.checkErrors()
}
