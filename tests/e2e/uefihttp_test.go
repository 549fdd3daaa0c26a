//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"golang.org/x/sys/unix"

	"castiron/ramdisk/lldp"
)

// TestUEFIHTTPBootInspection: agent inspection of a UEFI qemu VM behind
// castiron's Redfish emulator with boot interface redfish-https: castiron
// builds the node's ISO and sets a one-time UefiHttp boot with HttpBootUri
// pointing at it; the emulator's firmware half fetches that URL and boots
// it (no virtual media, no DHCP/PXE server anywhere); the agent configures
// its network from network_data and, castiron being started with
// --inspection-kernel-args "ipa-collect-lldp=1 ...", listens for the LLDP
// frames a "switch" (the test, on the VM's tap) sends; the inventory's
// plugin_data carries them raw and parsed, the boot NIC pxe_enabled.
func TestUEFIHTTPBootInspection(t *testing.T) {
	r := newSimVMediaRig(t, "uefi", "--inspection-kernel-args", "ipa-collect-lldp=1 ipa-lldp-timeout=20")
	r.boot = "redfish-https"
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	sw := []lldp.TLV{
		{Type: lldp.TypeChassisID, Value: []byte{4, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01}},
		{Type: lldp.TypePortID, Value: append([]byte{5}, "swp7"...)},
		{Type: lldp.TypeTTL, Value: []byte{0, 120}},
		{Type: lldp.TypeSysName, Value: []byte("e2e-switch")},
	}
	lctx, stop := context.WithCancel(ctx)
	defer stop()
	go sendLLDP(lctx, t, "/var/run/netns/"+r.bmc.ns, simTap, lldp.Encode(sw))

	r.enroll(ctx, t, "uefihttp", "agent")
	r.move(ctx, t, "manage", "manageable", 90*time.Second)
	r.inspectByAgent(ctx, t, "uefihttp_inspect_agent", "uefi")
	stop()

	var st struct {
		LastBoot struct{ Target, HTTPBootURI, HTTPBootFile string }
		Stats    struct{ Inserts int }
	}
	r.bmc.get(t, "/redfishsim/state", &st)
	// The VM's last start was the inspection's: UefiHttp, with the image
	// the emulator fetched from castiron's ISO URL.
	if st.LastBoot.Target != "UefiHttp" || st.LastBoot.HTTPBootFile == "" {
		t.Errorf("last boot %+v, want UefiHttp from a fetched image", st.LastBoot)
	}
	if st.Stats.Inserts != 0 {
		t.Errorf("virtual media inserted %d times for a redfish-https node", st.Stats.Inserts)
	}

	var inv struct {
		PluginData struct {
			AllInterfaces map[string]struct {
				MACAddress string `json:"mac_address"`
				PXEEnabled bool   `json:"pxe_enabled"`
			} `json:"all_interfaces"`
			ParsedLLDP map[string]map[string]any `json:"parsed_lldp"`
			LLDPRaw    map[string][][2]any       `json:"lldp_raw"`
		} `json:"plugin_data"`
	}
	if err := r.c.Do(ctx, "GET", "/v1/nodes/"+r.node.UUID+"/inventory", nil, &inv); err != nil {
		t.Fatalf("inventory: %v", err)
	}
	b, _ := json.Marshal(inv.PluginData)
	var nic string
	for name, i := range inv.PluginData.AllInterfaces {
		if i.MACAddress == simVMMAC {
			nic = name
			if !i.PXEEnabled {
				t.Errorf("all_interfaces[%s] (the boot NIC) not pxe_enabled: %s", name, b)
			}
		}
	}
	if nic == "" {
		t.Fatalf("no interface with %s in all_interfaces: %s", simVMMAC, b)
	}
	if p := inv.PluginData.ParsedLLDP[nic]; p["switch_port_id"] != "swp7" || p["switch_system_name"] != "e2e-switch" || p["switch_chassis_id"] != "02:00:00:00:00:01" {
		t.Errorf("parsed_lldp[%s] = %v: %s", nic, p, b)
	}
	if len(inv.PluginData.LLDPRaw[nic]) != len(sw) {
		t.Errorf("lldp_raw[%s]: %s", nic, b)
	}
}

// sendLLDP sends the LLDPDU on ifname inside the namespace at nsPath every
// 200 ms until ctx ends, as a switch port does (every 30 s) to its
// neighbour. The goroutine stays on a thread of its own in that namespace;
// the thread is discarded when it returns.
func sendLLDP(ctx context.Context, t *testing.T, nsPath, ifname string, pdu []byte) {
	runtime.LockOSThread()
	f, err := os.Open(nsPath)
	if err != nil {
		t.Errorf("LLDP sender: %v", err)
		return
	}
	defer f.Close()
	if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
		t.Errorf("LLDP sender: setns: %v", err)
		return
	}
	ifi, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Errorf("LLDP sender: %v", err)
		return
	}
	c, err := packet.Listen(ifi, packet.Raw, lldp.EtherType, nil)
	if err != nil {
		t.Errorf("LLDP sender: %v", err)
		return
	}
	defer c.Close()
	dst := net.HardwareAddr{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}
	src := net.HardwareAddr{0x02, 0, 0, 0, 0, 0x01} // the switch port's
	frame := append(append(append([]byte{}, dst...), src...), 0x88, 0xcc)
	frame = append(frame, pdu...)
	sent := 0
	defer func() { t.Logf("LLDP sender: %d frames sent on %s", sent, ifname) }()
	for {
		if _, err := c.WriteTo(frame, &packet.Addr{HardwareAddr: dst}); err == nil {
			sent++
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}
