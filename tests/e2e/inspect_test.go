//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// In-band inspection through the real path: castiron powers the VM on via
// IPMI with boot device PXE, answers its DHCP, serves iPXE, the kernel and
// the initramfs, the agent posts the inventory, castiron stores it, fills
// the properties and powers the VM off.

// inspectCase is one inspection scenario.
type inspectCase struct {
	label    string // E2E-TIMING label
	opts     LabOptions
	withPort bool
	timeout  time.Duration
	castiron CastironOptions
}

func TestInspectBIOS(t *testing.T) {
	inspectToManageable(t, inspectCase{
		label:    "inspect_bios",
		opts:     LabOptions{Boot: "bios", MemMB: 1024, CPUs: 2, Disks: []DiskSpec{{SizeGiB: 5, Serial: "E2EROOT0"}}},
		withPort: true,
		timeout:  180 * time.Second,
	})
}

// TestInspectBIOSPortless inspects a node that has no ports: the agent
// cannot tell its BMC address in qemu, so castiron must take the only node
// in inspect wait for the unknown MAC and create the port itself (DHCP
// answers unknown MACs while such an inspection runs).
func TestInspectBIOSPortless(t *testing.T) {
	inspectToManageable(t, inspectCase{
		label:    "inspect_bios_portless",
		opts:     LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1, Disks: []DiskSpec{{SizeGiB: 5, Serial: "E2EROOT0"}}},
		withPort: false,
		timeout:  180 * time.Second,
	})
}

func TestInspectUEFI(t *testing.T) {
	inspectToManageable(t, inspectCase{
		label:    "inspect_uefi",
		opts:     LabOptions{Boot: "uefi", MemMB: 1024, CPUs: 1, Disks: []DiskSpec{{SizeGiB: 5, Serial: "E2EROOT0"}}},
		withPort: true,
		timeout:  300 * time.Second,
	})
}

// TestInspectArm64: a qemu-system-aarch64 VM (virt, Cortex-A57, AAVMF,
// TCG) PXE-boots castiron's network GRUB (DHCP architecture 11), which
// loads its grub.cfg over TFTP and the arm64 kernel and initramfs (make
// ramdisk ARCH=arm64) over HTTP; the arm64 agent inspects the VM, which
// becomes manageable with cpu_arch aarch64. Emulated arm64 is slow: the
// callback timeout is raised.
func TestInspectArm64(t *testing.T) {
	arm64RamdiskDir(t)
	inspectToManageable(t, inspectCase{
		label:    "inspect_arm64",
		opts:     LabOptions{Arch: "aarch64", Boot: "uefi", MemMB: 1024, CPUs: 1, Disks: []DiskSpec{{SizeGiB: 5, Serial: "E2EROOT0"}}},
		withPort: true,
		timeout:  10 * time.Minute,
		castiron: CastironOptions{CallbackTimeout: 10 * time.Minute},
	})
}

func inspectToManageable(t *testing.T, tc inspectCase) {
	ramdiskDir(t) // skip before building anything when there is no ramdisk
	l := NewLab(t, tc.opts)
	c := StartCastiron(t, l, tc.castiron)
	node := c.EnrollIPMINode(t, l, strings.ReplaceAll(tc.label, "_", "-"), tc.withPort)
	ctx, cancel := context.WithTimeout(context.Background(), tc.timeout+2*time.Minute)
	defer cancel()

	cpu0 := processCPU(c.PID())
	start := time.Now()
	if err := c.SetProvisionState(ctx, node.UUID, "inspect"); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	n, err := c.WaitProvisionState(ctx, node.UUID, "manageable", tc.timeout)
	end := time.Now()
	cpu := processCPU(c.PID()) - cpu0
	if cpu0 < 0 || cpu < 0 {
		cpu = -1
	}
	if err != nil {
		t.Log(TimingLine(tc.label+"_failed", start, end, BootPhases(ctx, l, c, node.UUID, start, end)))
		t.Fatalf("inspect: %v", err)
	}

	// The VM powers off (agent or castiron) and the BMC agrees.
	expectPoweredOff(ctx, t, l, "after inspection", 60*time.Second)
	rec := bootRecord(ctx, l, c, node.UUID)
	t.Log(TimingLine(tc.label, start, end, bootPhases(l, rec, start, end)))
	t.Log(CastironShare(tc.label+"_castiron", start, end, rec, cpu))

	checkInspectedProperties(t, n, tc.opts)
	checkPorts(ctx, t, c, n.UUID, l.MACs[0])
	checkInventory(ctx, t, c, n.UUID, l)
}

// expectPoweredOff wants the VM gone within d and the BMC to say "off".
func expectPoweredOff(ctx context.Context, t *testing.T, l *Lab, when string, d time.Duration) {
	t.Helper()
	offCtx, offCancel := context.WithTimeout(ctx, d)
	defer offCancel()
	if err := l.WaitQEMU(offCtx, false); err != nil {
		t.Errorf("%s: %v", when, err)
	}
	if on, err := l.PowerStatus(ctx); err != nil || on {
		t.Errorf("%s: BMC power on=%v err=%v, want off", when, on, err)
	}
}

// checkInspectedProperties compares the properties castiron filled in with
// the VM's definition. local_gb is Ironic's: the root disk (smallest disk of
// at least 4 GiB) in GiB, minus 1 GiB for the partitioning.
func checkInspectedProperties(t *testing.T, n *Node, o LabOptions) {
	t.Helper()
	want := map[string]int{
		"cpus":      o.CPUs,
		"memory_mb": o.MemMB,
		"local_gb":  rootDiskGiB(o.Disks) - 1,
	}
	for key, w := range want {
		got, ok := intProp(n.Properties[key])
		if !ok || got != w {
			t.Errorf("properties.%s = %v, want %d (properties: %v)", key, n.Properties[key], w, n.Properties)
		}
	}
	wantArch := o.Arch
	if wantArch == "" {
		wantArch = "x86_64"
	}
	if got := n.Properties["cpu_arch"]; got != wantArch {
		t.Errorf("properties.cpu_arch = %v, want %s", got, wantArch)
	}
}

// rootDiskGiB is the size of the disk Ironic picks as root by default.
func rootDiskGiB(disks []DiskSpec) int {
	best := 0
	for _, d := range disks {
		if d.SizeGiB >= 4 && (best == 0 || d.SizeGiB < best) {
			best = d.SizeGiB
		}
	}
	return best
}

// checkPorts wants a pxe_enabled port for the boot NIC.
func checkPorts(ctx context.Context, t *testing.T, c *Castiron, nodeUUID, mac string) {
	t.Helper()
	ports, err := c.Ports(ctx, nodeUUID)
	if err != nil {
		t.Errorf("ports: %v", err)
		return
	}
	for _, p := range ports {
		if strings.EqualFold(p.Address, mac) {
			if !p.PXEEnabled {
				t.Errorf("port %s: pxe_enabled false", mac)
			}
			return
		}
	}
	t.Errorf("no port for the VM's MAC %s: %+v", mac, ports)
}

// checkInventory wants the stored inventory to describe the VM: its disks
// (size, serial), CPU count, memory and boot NIC.
func checkInventory(ctx context.Context, t *testing.T, c *Castiron, nodeUUID string, l *Lab) {
	t.Helper()
	inv, _, err := c.Inventory(ctx, nodeUUID)
	if err != nil {
		t.Errorf("inventory: %v", err)
		return
	}
	for _, want := range l.Opts.Disks {
		found := false
		for _, d := range inv.Disks {
			if d.Serial != nil && *d.Serial == want.Serial {
				found = true
				if d.Size != int64(want.SizeGiB)<<30 {
					t.Errorf("inventory disk %s (%s): size %d, want %d", d.Name, want.Serial, d.Size, int64(want.SizeGiB)<<30)
				}
			}
		}
		if !found {
			t.Errorf("inventory has no disk with serial %s: %+v", want.Serial, inv.Disks)
		}
	}
	if inv.CPU.Count != l.Opts.CPUs {
		t.Errorf("inventory cpu.count = %d, want %d", inv.CPU.Count, l.Opts.CPUs)
	}
	if inv.Memory.PhysicalMB != int64(l.Opts.MemMB) {
		t.Errorf("inventory memory.physical_mb = %d, want %d", inv.Memory.PhysicalMB, l.Opts.MemMB)
	}
	nic := false
	for _, i := range inv.Interfaces {
		nic = nic || strings.EqualFold(i.MACAddress, l.MACs[0])
	}
	if !nic {
		t.Errorf("inventory has no interface with MAC %s: %+v", l.MACs[0], inv.Interfaces)
	}
	wantMode := l.Opts.Boot
	if inv.Boot.CurrentBootMode != wantMode {
		t.Errorf("inventory boot.current_boot_mode = %q, want %q", inv.Boot.CurrentBootMode, wantMode)
	}
}

// TestInspectAbort aborts an inspection while the VM network-boots: the node
// fails inspection at once, the VM is powered off, and the history says why.
func TestInspectAbort(t *testing.T) {
	ramdiskDir(t)
	l := NewLab(t, LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1})
	c := StartCastiron(t, l, CastironOptions{})
	node := c.EnrollIPMINode(t, l, "inspect-abort", true)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	start := time.Now()
	if err := c.SetProvisionState(ctx, node.UUID, "inspect"); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	if _, err := c.WaitProvisionState(ctx, node.UUID, "inspect wait", 60*time.Second); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	upCtx, upCancel := context.WithTimeout(ctx, 30*time.Second)
	defer upCancel()
	if err := l.WaitQEMU(upCtx, true); err != nil {
		t.Fatalf("inspect wait, but the VM is off: %v", err)
	}
	// Let the firmware get onto the network, so the abort hits a real boot.
	_ = waitConsole(ctx, l, start, 20*time.Second, markFirstDHCP...)

	abortAt := time.Now()
	if err := c.SetProvisionState(ctx, node.UUID, "abort"); err != nil {
		t.Fatalf("abort: %v", err)
	}
	n, err := c.WaitProvisionState(ctx, node.UUID, "inspect failed", 10*time.Second)
	if err != nil {
		t.Fatalf("abort: %v", err)
	}
	failedAt := time.Now()
	if !strings.Contains(strings.ToLower(n.LastErr()), "abort") {
		t.Errorf("last_error %q does not mention the abort", n.LastErr())
	}
	offCtx, offCancel := context.WithTimeout(ctx, 30*time.Second)
	defer offCancel()
	if err := l.WaitQEMU(offCtx, false); err != nil {
		t.Errorf("after abort: %v", err)
	}
	offAt := time.Now()
	if on, err := l.PowerStatus(ctx); err != nil || on {
		t.Errorf("after abort: BMC power on=%v err=%v, want off", on, err)
	}

	history, err := c.History(ctx, node.UUID)
	if err != nil {
		t.Errorf("history: %v", err)
	}
	aborted := false
	for _, h := range history {
		aborted = aborted || strings.Contains(strings.ToLower(h.Event), "abort")
	}
	if !aborted {
		t.Errorf("history does not show the abort: %+v", history)
	}
	if tl, ok, err := c.BootTimeline(ctx, node.UUID); err != nil {
		t.Errorf("boot_timeline: %v", err)
	} else if ok {
		for _, ev := range tl {
			t.Logf("timeline %s %s %s %s", ev.At.Format("15:04:05.000"), ev.MAC, ev.Kind, ev.Detail)
		}
	} else {
		t.Log("boot_timeline: not served (404)")
	}
	t.Logf("E2E-TIMING inspect_abort abort_after=%.2fs inspect_failed=%.2fs vm_off=%.2fs",
		abortAt.Sub(start).Seconds(), failedAt.Sub(abortAt).Seconds(), offAt.Sub(abortAt).Seconds())
}

// intProp reads an integer property the way Ironic stores them (number or
// numeric string).
func intProp(v any) (int, bool) {
	switch v := v.(type) {
	case float64:
		if v != math.Trunc(v) {
			return 0, false
		}
		return int(v), true
	case string:
		n, err := strconv.Atoi(strings.TrimSpace(v))
		return n, err == nil
	}
	return 0, false
}

// ctxErrorf is fmt.Errorf with the context's error appended.
func ctxErrorf(ctx context.Context, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ctx.Err())...)
}
