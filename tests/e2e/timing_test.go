//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"castiron/pxe/boot"
)

// Phase is one measured point of a boot, relative to the request that
// started it.
type Phase struct {
	Name   string
	At     time.Time // zero: not seen
	Source string    // console, timeline, history, bmc, api
}

// Serial-console markers, in boot order. The first match after the start
// wins. iPXE's "Configuring (net0 ...)" line is stamped at its first byte,
// i.e. when the DHCP DISCOVER goes out; EDK2 prints ">>Start PXE over IPv4".
var (
	markFirstDHCP = []string{"Configuring (net", ">>Start PXE over IPv4", ">>Start PXE over IPv6"}
	// iPXE has started (the NIC ROM, or the binary castiron served).
	markIPXE   = []string{"iPXE initialising devices"}
	markKernel = []string{"Linux version"}
	// The agent's own banner, else the kernel handing over to /init.
	markAgent = []string{"castiron-agent", "castiron agent", "Run /init as init process"}
)

// BootPhases measures a network boot that started at start (the provision
// request) and ended at end (the target state seen), in boot order:
//
//	power_on      the BMC starts the VM (chassis program)
//	first_dhcp    the firmware's first DHCPDISCOVER (timeline)
//	first_ack     its DHCPACK (EDK2 collects offers ~4 s before it asks)
//	ipxe_loaded   iPXE runs: the end of its TFTP transfer (UEFI), else its
//	              banner on the console (qemu's BIOS NIC ROM is iPXE)
//	ipxe_dhcp     iPXE's own DHCPDISCOVER (the same as first_dhcp for BIOS)
//	script        the iPXE script served
//	kernel_fetched, initrd_fetched   the end of each HTTP transfer
//	kernel        the kernel's first console line (after decompression)
//	agent         the agent's first console line
//	agent_dhcp    the agent's DHCPDISCOVER
//	agent_lookup  GET /v1/lookup ("-": inspection posts without one)
//	inventory     POST /v1/continue_inspection accepted (else the history)
//	manageable    castiron leaves inspecting (node history, server side)
//	done          the test saw the target state (it polls the API)
//	power_off     the VM is gone
//
// The boot timeline is preferred; the serial console and the node's
// history fill in.
func BootPhases(ctx context.Context, l *Lab, c *Castiron, nodeUUID string, start, end time.Time) []Phase {
	return bootPhases(l, bootRecord(ctx, l, c, nodeUUID), start, end)
}

// bootRecords is what a boot left behind: the boot timeline, the node's
// history, the VM's console and the chassis program's power events.
type bootRecords struct {
	timeline []TimelineEvent
	history  []HistoryEvent
	console  []ConsoleLine
	events   []ConsoleLine
}

func bootRecord(ctx context.Context, l *Lab, c *Castiron, nodeUUID string) bootRecords {
	var r bootRecords
	r.timeline, _, _ = c.BootTimeline(ctx, nodeUUID)
	r.history, _ = c.History(ctx, nodeUUID)
	r.console = l.Console()
	r.events = l.VMEvents()
	return r
}

// firstEvent is the first timeline event of kind at or after since whose
// detail contains every one of subs (and no "incomplete").
func (r bootRecords) firstEvent(since time.Time, kind string, subs ...string) (TimelineEvent, bool) {
next:
	for _, ev := range r.timeline {
		if ev.Kind != kind || ev.At.Before(since) || strings.Contains(ev.Detail, "incomplete") {
			continue
		}
		for _, s := range subs {
			if !strings.Contains(ev.Detail, s) {
				continue next
			}
		}
		return ev, true
	}
	return TimelineEvent{}, false
}

// historyAt is the first history event at or after since containing any
// of subs.
func (r bootRecords) historyAt(since time.Time, subs ...string) (time.Time, bool) {
	for _, h := range r.history {
		if at := h.Time(); !at.Before(since) {
			for _, s := range subs {
				if strings.Contains(h.Event, s) {
					return at, true
				}
			}
		}
	}
	return time.Time{}, false
}

func bootPhases(_ *Lab, r bootRecords, start, end time.Time) []Phase {
	var phases []Phase
	add := func(name string, at time.Time, src string) {
		phases = append(phases, Phase{Name: name, At: at, Source: src})
	}
	fromConsole := func(name string, marks []string) {
		if l, ok := firstLine(r.console, start, marks...); ok {
			add(name, l.At, "console")
			return
		}
		add(name, time.Time{}, "")
	}
	fromTimeline := func(name, kind string, subs ...string) bool {
		if ev, ok := r.firstEvent(start, kind, subs...); ok {
			add(name, ev.At, "timeline")
			return true
		}
		return false
	}
	orNone := func(name string, found bool) {
		if !found {
			add(name, time.Time{}, "")
		}
	}

	if ev, ok := firstLine(r.events, start, "start bootdev="); ok {
		add("power_on", ev.At, "bmc")
	} else {
		add("power_on", time.Time{}, "")
	}
	if !fromTimeline("first_dhcp", boot.DHCPDiscover) {
		fromConsole("first_dhcp", markFirstDHCP)
	}
	orNone("first_ack", fromTimeline("first_ack", boot.DHCPAck))
	if !fromTimeline("ipxe_loaded", boot.TFTPServed) {
		fromConsole("ipxe_loaded", markIPXE)
	}
	orNone("ipxe_dhcp", fromTimeline("ipxe_dhcp", boot.DHCPDiscover, "ipxe=true"))
	orNone("script", fromTimeline("script", boot.HTTPScript))
	orNone("kernel_fetched", fromTimeline("kernel_fetched", boot.HTTPKernel))
	orNone("initrd_fetched", fromTimeline("initrd_fetched", boot.HTTPInitramfs))
	at, src := kernelStart(r.console, start)
	add("kernel", at, src)
	fromConsole("agent", markAgent)
	orNone("agent_dhcp", fromTimeline("agent_dhcp", boot.DHCPDiscover, "arch=agent"))
	orNone("agent_lookup", fromTimeline("agent_lookup", boot.AgentLookup, "token issued"))
	inventory, ok := r.firstEvent(start, boot.AgentInspect, "inventory accepted")
	if ok {
		add("inventory", inventory.At, "timeline")
	} else if at, ok := r.historyAt(start, "inspect wait -> "); ok {
		add("inventory", at, "history")
	} else {
		add("inventory", time.Time{}, "")
	}
	if at, ok := r.historyAt(start, "inspecting -> manageable", "inspecting -> inspect failed"); ok {
		add("manageable", at, "history")
	} else {
		add("manageable", time.Time{}, "")
	}
	add("done", end, "api")
	if ev, ok := firstLine(r.events, start, "stop ("); ok {
		add("power_off", ev.At, "bmc")
	} else if l, ok := firstLine(r.console, start, "=== disconnect"); ok {
		add("power_off", l.At, "console")
	} else {
		add("power_off", time.Time{}, "")
	}
	return phases
}

// kernelStart is when the kernel started (zero if not seen): its banner on
// the console, else the agent's uptime (kernelFromAgentUptime). src says which.
func kernelStart(console []ConsoleLine, since time.Time) (at time.Time, src string) {
	if l, ok := firstLine(console, since, markKernel...); ok {
		return l.At, "console"
	}
	if at, ok := kernelFromAgentUptime(console, since); ok {
		return at, "agent uptime"
	}
	return time.Time{}, ""
}

// kernelFromAgentUptime is when the kernel started, from the agent's
// first console line: a quiet kernel (the ramdisk's command line says
// quiet) prints no banner, but every agent line carries the kernel's
// uptime ("castiron-agent[2.91]: starting ..."), so the kernel started
// that long before the line.
func kernelFromAgentUptime(console []ConsoleLine, since time.Time) (time.Time, bool) {
	l, ok := firstLine(console, since, "castiron-agent[")
	if !ok {
		return time.Time{}, false
	}
	_, rest, _ := strings.Cut(l.Text, "castiron-agent[")
	up, _, ok := strings.Cut(rest, "]")
	secs, err := strconv.ParseFloat(up, 64)
	if !ok || err != nil || secs < 0 {
		return time.Time{}, false
	}
	return l.At.Add(-time.Duration(secs * float64(time.Second))), true
}

// withPhases sets each of more in phases: in place of the phase of the
// same name, else at the end.
func withPhases(phases []Phase, more ...Phase) []Phase {
next:
	for _, m := range more {
		for i := range phases {
			if phases[i].Name == m.Name {
				phases[i] = m
				continue next
			}
		}
		phases = append(phases, m)
	}
	return phases
}

// TimingLine is the parseable summary the issue notes quote:
//
//	E2E-TIMING inspect_bios total=41.20s power_on=0.61s first_dhcp=3.10s kernel=5.52s agent=8.03s callback=9.90s done=10.12s power_off=10.40s
//
// Each value is seconds since start; "-" when the phase was not seen.
func TimingLine(label string, start, end time.Time, phases []Phase) string {
	var b strings.Builder
	fmt.Fprintf(&b, "E2E-TIMING %s total=%.2fs", label, end.Sub(start).Seconds())
	for _, p := range phases {
		if p.At.IsZero() {
			fmt.Fprintf(&b, " %s=-", p.Name)
			continue
		}
		fmt.Fprintf(&b, " %s=%.2fs", p.Name, p.At.Sub(start).Seconds())
	}
	return b.String()
}

// CastironShare is castiron's own part of a boot, from the per-request
// times castiron records in the boot timeline (took=: packet or request in,
// answer ready; for a file, until its first byte) plus the conductor's
// steps, summed, and its share of the whole (end - start):
//
//	E2E-TIMING inspect_bios_castiron total=10.00s castiron=0.2500s share=2.50% power_on=0.0300s dhcp=0.0040s/4 tftp=0.0000s/0 script=0.0010s/1 files=0.0020s/2 agent_api=0.0130s/1 apply=0.2000s cpu=0.30s cpu_share=3.00%
//
// power_on is the inspect request to the BMC's power-on command (API,
// state change, IPMI boot device); apply is the inventory accepted to
// the node leaving inspecting (ports, power off through the BMC,
// properties) less bmc_off, the BMC's own time from its power-off command
// to the VM stopped (castiron polls for it meanwhile; like power_on, which
// ends at the BMC's command, the BMC's execution is not castiron's). The /n counts are requests. cpu is the castiron process's
// CPU time over the same span (/proc, 10 ms ticks): everything castiron
// did, whether on the boot's path or not, as a bound on the per-request sum.
func CastironShare(label string, start, end time.Time, r bootRecords, cpu time.Duration) string {
	total := end.Sub(start)
	var b strings.Builder
	var sum time.Duration
	part := func(name string, d time.Duration, n int) {
		sum += d
		if n < 0 {
			fmt.Fprintf(&b, " %s=%.4fs", name, d.Seconds())
			return
		}
		fmt.Fprintf(&b, " %s=%.4fs/%d", name, d.Seconds(), n)
	}
	if ev, ok := firstLine(r.events, start, "bmc set power=1"); ok {
		part("power_on", ev.At.Sub(start), -1)
	} else {
		b.WriteString(" power_on=-")
	}
	for _, g := range []struct {
		name  string
		kinds []string
	}{
		{"dhcp", []string{boot.DHCPOffer, boot.DHCPAck, boot.DHCPNak}},
		{"tftp", []string{boot.TFTPServed}},
		{"script", []string{boot.HTTPScript}},
		{"files", []string{boot.HTTPKernel, boot.HTTPInitramfs, boot.HTTPLoader}},
		{"agent_api", []string{boot.AgentLookup, boot.AgentInspect, boot.AgentBeat}},
	} {
		var d time.Duration
		n := 0
		for _, ev := range r.timeline {
			if ev.At.Before(start) || ev.At.After(end) || !slices.Contains(g.kinds, ev.Kind) {
				continue
			}
			if took, ok := boot.ParseTook(ev.Detail); ok {
				d += took
				n++
			}
		}
		part(g.name, d, n)
	}
	inventory, okInv := r.firstEvent(start, boot.AgentInspect, "inventory accepted")
	left, okLeft := r.historyAt(start, "inspecting -> manageable", "inspecting -> inspect failed")
	if okInv && okLeft && left.After(inventory.At) {
		off := bmcPowerOff(r.events, inventory.At, left)
		part("apply", left.Sub(inventory.At)-off, -1)
		fmt.Fprintf(&b, " bmc_off=%.4fs", off.Seconds()) // the BMC's, not summed
	} else {
		b.WriteString(" apply=- bmc_off=-")
	}
	head := fmt.Sprintf("E2E-TIMING %s total=%.2fs castiron=%.4fs share=%.2f%%", label, total.Seconds(), sum.Seconds(), pct(sum, total))
	tail := " cpu=-"
	if cpu >= 0 {
		tail = fmt.Sprintf(" cpu=%.2fs cpu_share=%.2f%%", cpu.Seconds(), pct(cpu, total))
	}
	return head + b.String() + tail
}

// bmcPowerOff is the BMC's power-off time within [from, to]: its "set
// power=0" command to the VM's stop, or 0 when either is missing.
func bmcPowerOff(events []ConsoleLine, from, to time.Time) time.Duration {
	set, ok := firstLine(events, from, "bmc set power=0")
	if !ok || set.At.After(to) {
		return 0
	}
	stop, ok := firstLine(events, set.At, "stop (bmc power off)")
	if !ok || stop.At.After(to) {
		return 0
	}
	return stop.At.Sub(set.At)
}

func pct(part, whole time.Duration) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * part.Seconds() / whole.Seconds()
}

// processCPU is a process's user+system CPU time so far (/proc/PID/stat,
// in clock ticks of 10 ms: USER_HZ is 100 on Linux); -1 when unreadable.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The command name (field 2) may hold spaces: count from its ")".
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return -1
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return -1
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return -1
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond
}
