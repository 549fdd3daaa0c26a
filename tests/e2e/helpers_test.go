//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"testing"
	"time"
)

// Pure helpers of the harness; these need no root.

func TestParseEpoch(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Time
		ok   bool
	}{
		{"1795318974.777", time.Unix(1795318974, 777e6), true},
		{"1795318974.123456789", time.Unix(1795318974, 123456789), true},
		{"1795318974", time.Unix(1795318974, 0), true},
		{"1795318974.1234567891", time.Unix(1795318974, 123456789), true},
		{"x.1", time.Time{}, false},
	} {
		got, err := parseEpoch(tc.in)
		if (err == nil) != tc.ok || (tc.ok && !got.Equal(tc.want)) {
			t.Errorf("parseEpoch(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}

func TestFirstLine(t *testing.T) {
	t0 := time.Unix(1000, 0)
	lines := []ConsoleLine{
		{t0.Add(-time.Second), "Configuring (net0 old boot)"},
		{t0.Add(1 * time.Second), "iPXE initialising devices...ok"},
		{t0.Add(2 * time.Second), "Configuring (net0 52:54:00:00:00:01)......"},
		{t0.Add(5 * time.Second), "[    0.000000] Linux version 6.1.0-56-amd64"},
	}
	for _, tc := range []struct {
		marks []string
		want  time.Duration
		ok    bool
	}{
		{markFirstDHCP, 2 * time.Second, true},
		{markKernel, 5 * time.Second, true},
		{markAgent, 0, false},
	} {
		l, ok := firstLine(lines, t0, tc.marks...)
		if ok != tc.ok || (ok && l.At.Sub(t0) != tc.want) {
			t.Errorf("firstLine(%q) = %v at %v, want %v at %v", tc.marks, ok, l.At.Sub(t0), tc.ok, tc.want)
		}
	}
}

func TestTimelineEventJSON(t *testing.T) {
	for _, tc := range []struct {
		in   string
		kind string
		node string
	}{
		{`{"at":"2026-11-22T08:07:13.158687+00:00","mac":"52:54:00:00:00:01","node_uuid":null,"event":"dhcp_discover","detail":"x"}`, "dhcp_discover", ""},
		{`{"at":"2026-11-22T08:07:13Z","mac":"52:54:00:00:00:01","node_uuid":"u","kind":"agent_inventory"}`, "agent_inventory", "u"},
	} {
		var ev TimelineEvent
		if err := json.Unmarshal([]byte(tc.in), &ev); err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if ev.Kind != tc.kind || ev.NodeUUID != tc.node || ev.At.IsZero() {
			t.Errorf("%s: got %+v", tc.in, ev)
		}
	}
}

func TestRootDiskAndProps(t *testing.T) {
	if got := rootDiskGiB([]DiskSpec{{SizeGiB: 2}, {SizeGiB: 8}, {SizeGiB: 5}}); got != 5 {
		t.Errorf("rootDiskGiB = %d, want 5 (smallest of at least 4 GiB)", got)
	}
	for _, tc := range []struct {
		in   any
		want int
		ok   bool
	}{
		{float64(4), 4, true}, {"1024", 1024, true}, {4.5, 0, false}, {nil, 0, false},
	} {
		if got, ok := intProp(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("intProp(%v) = %d, %v", tc.in, got, ok)
		}
	}
}

func TestTimingLine(t *testing.T) {
	start := time.Unix(1000, 0)
	got := TimingLine("inspect_bios", start, start.Add(41200*time.Millisecond), []Phase{
		{Name: "power_on", At: start.Add(610 * time.Millisecond)},
		{Name: "kernel"},
	})
	want := "E2E-TIMING inspect_bios total=41.20s power_on=0.61s kernel=-"
	if got != want {
		t.Errorf("TimingLine = %q, want %q", got, want)
	}
}

// TestCastironShare sums the took= of the answers and the conductor's
// steps from a recorded boot (no VM).
func TestCastironShare(t *testing.T) {
	start := time.Unix(1000, 0)
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	ev := func(ms int, kind, detail string) TimelineEvent {
		return TimelineEvent{At: at(ms), Kind: kind, Detail: detail}
	}
	r := bootRecords{
		events: []ConsoleLine{
			{At: at(20), Text: "bmc set boot=pxe"}, {At: at(30), Text: "bmc set power=1"},
			{At: at(9850), Text: "bmc set power=0"}, {At: at(9910), Text: "stop (bmc power off)"},
		},
		timeline: []TimelineEvent{
			ev(-5000, "dhcp_ack", "from an earlier boot took=9.000000s"),
			ev(3000, "dhcp_discover", "ip=- arch=0 ipxe=true"),
			ev(3001, "dhcp_offer", "ip=10.0.0.5 file=x took=0.001000s"),
			ev(3010, "dhcp_ack", "ip=10.0.0.5 file=x took=0.003000s"),
			ev(3100, "http_ipxe_script", "purpose=inspect took=0.001000s"),
			ev(4000, "http_kernel", "status=200 duration=0.9s took=0.000500s"),
			ev(5000, "http_initramfs", "status=200 duration=0.9s took=0.001500s"),
			ev(9800, "agent_inventory", "inventory accepted took=0.013000s"),
		},
		history: []HistoryEvent{
			{CreatedAt: "1970-01-01T00:16:40.040000+00:00", Event: "wait: inspecting -> inspect wait"},
			{CreatedAt: "1970-01-01T00:16:49.800000+00:00", Event: "resume: inspect wait -> inspecting"},
			{CreatedAt: "1970-01-01T00:16:50.000000+00:00", Event: "done: inspecting -> manageable"},
		},
	}
	got := CastironShare("inspect_bios_castiron", start, at(10000), r, 300*time.Millisecond)
	want := "E2E-TIMING inspect_bios_castiron total=10.00s castiron=0.1900s share=1.90% power_on=0.0300s dhcp=0.0040s/2 tftp=0.0000s/0 script=0.0010s/1 files=0.0020s/2 agent_api=0.0130s/1 apply=0.1400s bmc_off=0.0600s cpu=0.30s cpu_share=3.00%"
	if got != want {
		t.Errorf("CastironShare =\n%s\nwant\n%s", got, want)
	}
	if cpu := processCPU(os.Getpid()); cpu < 0 {
		t.Errorf("processCPU of this test = %s", cpu)
	}
}

func TestKernelFromAgentUptime(t *testing.T) {
	start := time.Unix(1000, 0)
	console := []ConsoleLine{
		{At: start.Add(-time.Second), Text: "castiron-agent[1.00]: an earlier boot"},
		{At: start.Add(3 * time.Second), Text: "iPXE initialising devices...ok"},
		{At: start.Add(9500 * time.Millisecond), Text: "castiron-agent[2.25]: starting version=dev pid1=true"},
		{At: start.Add(10 * time.Second), Text: "castiron-agent[2.75]: kernel command line"},
	}
	at, ok := kernelFromAgentUptime(console, start)
	if want := start.Add(7250 * time.Millisecond); !ok || !at.Equal(want) {
		t.Errorf("kernelFromAgentUptime = %v, %v; want %v", at, ok, want)
	}
	if at, src := kernelStart(console, start); src != "agent uptime" || !at.Equal(start.Add(7250*time.Millisecond)) {
		t.Errorf("kernelStart without a banner = %v, %q", at, src)
	}
	banner := append([]ConsoleLine{{At: start.Add(6 * time.Second), Text: "[    0.000000] Linux version 6.1.0-56-amd64"}}, console...)
	if at, src := kernelStart(banner, start); src != "console" || !at.Equal(start.Add(6*time.Second)) {
		t.Errorf("kernelStart with the banner = %v, %q", at, src)
	}
	for _, bad := range []string{"castiron-agent[x]: starting", "castiron-agent[1.0: starting", "no agent here"} {
		if at, ok := kernelFromAgentUptime([]ConsoleLine{{At: start.Add(time.Second), Text: bad}}, start); ok {
			t.Errorf("%q: %v, want not found", bad, at)
		}
	}
}

func TestWithPhases(t *testing.T) {
	start := time.Unix(1000, 0)
	got := TimingLine("discovery_bios", start, start.Add(5*time.Second), withPhases(
		[]Phase{{Name: "inventory", At: start.Add(time.Second)}, {Name: "manageable"}},
		Phase{Name: "enroll", At: start.Add(2 * time.Second)}, Phase{Name: "manageable", At: start.Add(3 * time.Second)}))
	want := "E2E-TIMING discovery_bios total=5.00s inventory=1.00s manageable=3.00s enroll=2.00s"
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

func TestLabOptionsDefaults(t *testing.T) {
	var o LabOptions
	if err := o.defaults(); err != nil {
		t.Fatal(err)
	}
	if o.Boot != "bios" || o.MemMB != 1024 || o.CPUs != 1 || o.NICs != 1 || len(o.Disks) != 1 || o.Disks[0].SizeGiB != 5 {
		t.Errorf("defaults: %+v", o)
	}
	for _, bad := range []LabOptions{
		{Boot: "pxe"},
		{Disks: []DiskSpec{{SizeGiB: 0, Serial: "A"}}},
		{Disks: []DiskSpec{{SizeGiB: 1, Serial: "has space"}}},
		{Disks: []DiskSpec{{SizeGiB: 1, Serial: "ABCDEFGHIJKLMNOPQRSTU"}}},
		{BMCOnBridge: true, InbandBMC: true},
	} {
		if err := bad.defaults(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}
