//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

// The smoke tests check the harness itself, without castiron: the BMC
// powers the VM on and off through ipmitool, the boot device is honoured,
// and the VM's firmware sends a DHCP DISCOVER onto the lab's bridge.

func TestLabSmokeBIOS(t *testing.T) { labSmoke(t, "bios") }

func TestLabSmokeUEFI(t *testing.T) { labSmoke(t, "uefi") }

// TestLabSmokeCastironNoPXE drives the lab through castiron without its PXE
// server: the API is reached through the namespace dialer, castiron's ipmi
// driver talks to the lab's BMC (manage), inspect sets boot device PXE and
// powers the VM on (its firmware DHCPs into the void), abort fails the
// inspection and powers the VM off.
func TestLabSmokeCastironNoPXE(t *testing.T) {
	l := NewLab(t, LabOptions{Boot: "bios", MemMB: 512})
	c := StartCastiron(t, l, CastironOptions{NoPXE: true})
	node := c.EnrollIPMINode(t, l, "smoke", true)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	if err := c.SetProvisionState(ctx, node.UUID, "inspect"); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if _, err := c.WaitProvisionState(ctx, node.UUID, "inspect wait", 30*time.Second); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if err := l.WaitQEMU(ctx, true); err != nil {
		t.Fatalf("inspect wait, but: %v", err)
	}
	if got := l.BootDevice(); got != "pxe" {
		t.Errorf("castiron left boot device %q, want pxe", got)
	}
	if err := waitConsole(ctx, l, start, 30*time.Second, markFirstDHCP...); err != nil {
		t.Fatalf("VM firmware: %v", err)
	}
	dhcp := time.Now()
	if err := c.SetProvisionState(ctx, node.UUID, "abort"); err != nil {
		t.Fatalf("abort: %v", err)
	}
	n, err := c.WaitProvisionState(ctx, node.UUID, "inspect failed", 10*time.Second)
	if err != nil {
		t.Fatalf("abort: %v", err)
	}
	t.Logf("inspect failed: %s", n.LastErr())
	offCtx, offCancel := context.WithTimeout(ctx, 30*time.Second)
	defer offCancel()
	if err := l.WaitQEMU(offCtx, false); err != nil {
		t.Fatalf("after abort: %v", err)
	}
	t.Logf("E2E-TIMING smoke_castiron_nopxe inspect_to_dhcp=%.2fs abort_to_off=%.2fs",
		dhcp.Sub(start).Seconds(), time.Since(dhcp).Seconds())
}

func labSmoke(t *testing.T, bootMode string) {
	requireLab(t, "tcpdump")
	testStart := time.Now()
	l := NewLab(t, LabOptions{Boot: bootMode, MemMB: 512})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	if on, err := l.PowerStatus(ctx); err != nil || on {
		t.Fatalf("fresh lab: power on=%v err=%v, want off", on, err)
	}

	// Disk first (BIOS only: SeaBIOS says so on the console within a second;
	// OVMF's message comes much later): no network boot.
	if bootMode == "bios" {
		if out, err := l.Ipmitool(ctx, "chassis", "bootdev", "disk"); err != nil {
			t.Fatalf("bootdev disk: %v: %s", err, out)
		}
		if got := l.BootDevice(); got != "default" {
			t.Fatalf("BMC stored boot device %q after bootdev disk, want default", got)
		}
		powerOn := time.Now()
		if out, err := l.Ipmitool(ctx, "chassis", "power", "on"); err != nil {
			t.Fatalf("power on: %v: %s", err, out)
		}
		if err := waitConsole(ctx, l, powerOn, 20*time.Second, "No bootable device", "Boot failed"); err != nil {
			t.Fatalf("disk boot: %v", err)
		}
		if _, ok := firstLine(l.Console(), powerOn, markFirstDHCP...); ok {
			t.Fatalf("disk boot: the VM network-booted")
		}
		powerOff(ctx, t, l)
	}

	// PXE: iPXE (BIOS) or EDK2 (UEFI) sends a DHCP DISCOVER from the VM's MAC.
	tcpdump, err := l.StartDaemon("tcpdump", "tcpdump", "-Z", "root", "-i", Bridge, "-n", "-l", "-v", "-c", "1",
		"udp dst port 67 and ether src "+l.MACs[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := waitFileContains(ctx, tcpdumpLog(l), "listening on", 10*time.Second); err != nil {
		t.Fatalf("tcpdump: %v", err)
	}
	if out, err := l.Ipmitool(ctx, "chassis", "bootdev", "pxe"); err != nil {
		t.Fatalf("bootdev pxe: %v: %s", err, out)
	}
	if got := l.BootDevice(); got != "pxe" {
		t.Fatalf("BMC stored boot device %q, want pxe", got)
	}
	powerOn := time.Now()
	if out, err := l.Ipmitool(ctx, "chassis", "power", "on"); err != nil {
		t.Fatalf("power on: %v: %s", err, out)
	}
	if err := l.WaitQEMU(ctx, true); err != nil {
		t.Fatal(err)
	}
	qemuUp := time.Now()
	if on, err := l.PowerStatus(ctx); err != nil || !on {
		t.Fatalf("after power on: power on=%v err=%v", on, err)
	}
	select {
	case <-tcpdump.exited:
	case <-time.After(90 * time.Second):
		t.Fatalf("no DHCP DISCOVER from %s within 90s", l.MACs[0])
	}
	dhcpSeen := time.Now()
	capture, _ := os.ReadFile(tcpdumpLog(l))
	if !strings.Contains(string(capture), "DHCP-Message (53), length 1: Discover") {
		t.Fatalf("tcpdump saw no DISCOVER:\n%s", capture)
	}
	wantVC := "PXEClient:Arch:00000" // iPXE ROM, x86 BIOS
	if bootMode == "uefi" {
		wantVC = "PXEClient:Arch:00007" // EDK2, x64 UEFI
	}
	if !strings.Contains(string(capture), wantVC) {
		t.Errorf("DISCOVER without vendor class %s:\n%s", wantVC, capture)
	}
	firmwareMark := "iPXE"
	if bootMode == "uefi" {
		firmwareMark = ">>Start PXE over IPv4"
	}
	if err := waitConsole(ctx, l, powerOn, 10*time.Second, firmwareMark); err != nil {
		t.Errorf("serial console: %v", err)
	}

	pid := l.QEMUPID()
	offStart := time.Now()
	powerOff(ctx, t, l)
	if procAlive(pid) {
		t.Fatalf("qemu pid %d still alive after power off", pid)
	}
	t.Logf("E2E-TIMING smoke_%s total=%.2fs power_on_to_qemu=%.2fs first_dhcp=%.2fs power_off=%.2fs",
		bootMode, time.Since(testStart).Seconds(), qemuUp.Sub(powerOn).Seconds(),
		dhcpSeen.Sub(powerOn).Seconds(), time.Since(offStart).Seconds())
}

// powerOff powers the VM off through the BMC and checks qemu is gone and the
// BMC says off.
func powerOff(ctx context.Context, t *testing.T, l *Lab) {
	t.Helper()
	if out, err := l.Ipmitool(ctx, "chassis", "power", "off"); err != nil {
		t.Fatalf("power off: %v: %s", err, out)
	}
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := l.WaitQEMU(wctx, false); err != nil {
		t.Fatal(err)
	}
	if on, err := l.PowerStatus(ctx); err != nil || on {
		t.Fatalf("after power off: power on=%v err=%v", on, err)
	}
}

func tcpdumpLog(l *Lab) string { return l.Dir + "/tcpdump.log" }

// waitConsole waits for a console line after since containing any of marks.
func waitConsole(ctx context.Context, l *Lab, since time.Time, d time.Duration, marks ...string) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if _, ok := firstLine(l.Console(), since, marks...); ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctxErrorf(ctx, "no console line with %q", marks)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitFileContains waits until path contains s.
func waitFileContains(ctx context.Context, path, s string, d time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		if b, _ := os.ReadFile(path); strings.Contains(string(b), s) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctxErrorf(ctx, "%s: no %q", path, s)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
