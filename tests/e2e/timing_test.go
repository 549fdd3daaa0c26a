//go:build e2e

package e2e

import (
	"context"
	"fmt"
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
	markKernel    = []string{"Linux version"}
	// The agent's own banner, else the kernel handing over to /init.
	markAgent = []string{"castiron-agent", "castiron agent", "Run /init as init process"}
)

// BootPhases measures a network boot that started at start (the provision
// request) and ended at end (the target state seen): BMC power on, first
// DHCP, kernel, agent, callback, power off. The boot timeline (when castiron
// serves it) is preferred for DHCP and the callback; the serial console and
// the node's history fill in.
func BootPhases(ctx context.Context, l *Lab, c *Castiron, nodeUUID string, start, end time.Time) []Phase {
	console := l.Console()
	events := l.VMEvents()
	timeline, _, _ := c.BootTimeline(ctx, nodeUUID)
	history, _ := c.History(ctx, nodeUUID)

	var phases []Phase
	add := func(name string, at time.Time, src string) {
		phases = append(phases, Phase{Name: name, At: at, Source: src})
	}
	fromConsole := func(name string, marks []string) {
		if l, ok := firstLine(console, start, marks...); ok {
			add(name, l.At, "console")
			return
		}
		add(name, time.Time{}, "")
	}
	fromTimeline := func(kind string) (time.Time, bool) {
		for _, ev := range timeline {
			if ev.Kind == kind && !ev.At.Before(start) {
				return ev.At, true
			}
		}
		return time.Time{}, false
	}

	if ev, ok := firstLine(events, start, "start bootdev="); ok {
		add("power_on", ev.At, "bmc")
	} else {
		add("power_on", time.Time{}, "")
	}
	if at, ok := fromTimeline(boot.DHCPDiscover); ok {
		add("first_dhcp", at, "timeline")
	} else {
		fromConsole("first_dhcp", markFirstDHCP)
	}
	fromConsole("kernel", markKernel)
	fromConsole("agent", markAgent)
	if at, ok := fromTimeline(boot.AgentInspect); ok {
		add("callback", at, "timeline")
	} else {
		found := false
		for _, h := range history {
			if at := h.Time(); !at.Before(start) && strings.Contains(h.Event, "inspect wait -> ") {
				add("callback", at, "history")
				found = true
				break
			}
		}
		if !found {
			add("callback", time.Time{}, "")
		}
	}
	add("done", end, "api")
	if ev, ok := firstLine(events, start, "stop ("); ok {
		add("power_off", ev.At, "bmc")
	} else if l, ok := firstLine(console, start, "=== disconnect"); ok {
		add("power_off", l.At, "console")
	} else {
		add("power_off", time.Time{}, "")
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
