//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"castiron/pxe/boot"
)

// IPv6-only provisioning network: the bridge has only ServerIP6/64;
// castiron sends router advertisements (M/O, the prefix on-link) and serves
// DHCPv6, TFTP and HTTP over IPv6; the agent gets its address by DHCPv6 and
// calls continue_inspection, lookup and heartbeat over IPv6. One VM per
// firmware is inspected, then deployed (no cleaning, to keep CI short).

func TestIPv6BIOS(t *testing.T) { ipv6InspectDeploy(t, "bios") }

// TestIPv6UEFI: OVMF's own PXEv6 (NIC ROM off, PXEv4 off) TFTPs snponly.efi
// from tftp://[ServerIP6]/, whose iPXE asks DHCPv6 again and gets the script.
func TestIPv6UEFI(t *testing.T) { ipv6InspectDeploy(t, "uefi") }

func ipv6InspectDeploy(t *testing.T, firmware string) {
	im := deployImagesFor(t)
	opts := LabOptions{Boot: firmware, IPv6Only: true, MemMB: 1024, CPUs: 1, Disks: []DiskSpec{{SizeGiB: 5, Serial: "E2EROOT0"}}}
	// OVMF's PXEv6 plus iPXE's wait for a DHCPv4 answer that never comes
	// make a UEFI boot over IPv6 about a minute slower than over IPv4.
	r := newDeployRigWith(t, "ipv6-"+firmware, opts, CastironOptions{CallbackTimeout: 5 * time.Minute}, im.Raw)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()

	// Inspection: the node is manageable again with inspected properties.
	start := time.Now()
	if err := r.c.SetProvisionState(ctx, r.node.UUID, "inspect"); err != nil {
		t.Fatalf("inspect: %v", err)
	}
	n, err := r.c.WaitProvisionState(ctx, r.node.UUID, "manageable", 5*time.Minute)
	end := time.Now()
	label := "inspect_ipv6_" + firmware
	if err != nil {
		t.Log(TimingLine(label+"_failed", start, end, BootPhases(ctx, r.l, r.c, r.node.UUID, start, end)))
		t.Fatalf("inspect over IPv6: %v", err)
	}
	t.Log(TimingLine(label, start, end, BootPhases(ctx, r.l, r.c, r.node.UUID, start, end)))
	checkInspectedProperties(t, n, opts)
	checkInventory(ctx, t, r.c, n.UUID, r.l)
	checkDHCPv6Timeline(ctx, t, r.c, n.UUID, r.l.MACs[0], start)
	r.waitVMOff(ctx, t, "after inspection", 60*time.Second)

	// Deployment over IPv6: lookup, heartbeats and the image download.
	r.setImage(ctx, t, im.Raw, "")
	r.provide(ctx, t, false)
	// The test image boots with SeaBIOS only (extlinux): the marker is
	// waited for on BIOS.
	run := r.deployTimed(ctx, t, "deploy_ipv6_"+firmware, firmware == "bios")
	if err := DiskStartsWith(r.l.DiskPath(0), im.Raw.Path); err != nil {
		t.Errorf("after deploying over IPv6: %v", err)
	}
	r.checkDeployRecord(ctx, t, run)
}

// checkDHCPv6Timeline wants the boot timeline to show the VM's MAC served
// by DHCPv6 with an address of the lab's prefix.
func checkDHCPv6Timeline(ctx context.Context, t *testing.T, c *Castiron, nodeUUID, mac string, since time.Time) {
	t.Helper()
	tl, ok, err := c.BootTimeline(ctx, nodeUUID)
	if err != nil || !ok {
		t.Errorf("boot_timeline: ok=%v %v", ok, err)
		return
	}
	acks := 0
	for _, ev := range tl {
		if ev.At.Before(since) {
			continue
		}
		t.Logf("timeline %s %s %s %s", ev.At.Format("15:04:05.000"), ev.MAC, ev.Kind, ev.Detail)
		if ev.Kind == boot.DHCPAck && strings.EqualFold(ev.MAC, mac) && strings.HasPrefix(ev.Detail, "dhcp6 ip=fd52:205::") {
			acks++
		}
	}
	if acks == 0 {
		t.Errorf("no DHCPv6 reply to %s with an fd52:205::/64 address in the boot timeline", mac)
	}
}
