package lldpcap

import (
	"context"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/mdlayher/packet"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"castiron/ramdisk/lldp"
)

// TestCollectVeth: in a network namespace of its own, a veth pair; a
// "switch" end sends one LLDP frame (after some other traffic) while
// Collect listens on the "host" end and on a NIC that hears nothing:
// the host NIC's TLVs come back as sent, the silent NIC is absent, and
// Collect returns at its wait. Needs root (CAP_NET_ADMIN); run it under
// flock /work/wt/.heavy.lock.
func TestCollectVeth(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root for a network namespace and raw sockets")
	}
	runtime.LockOSThread() // the namespace is this thread's; never unlocked: the thread dies with the test
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	ns, err := netns.New()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = netns.Set(orig); ns.Close() }()
	for _, pair := range [][2]string{{"host0", "sw0"}, {"host1", "sw1"}} {
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: pair[0]}, PeerName: pair[1]}); err != nil {
			t.Fatal(err)
		}
		for _, n := range pair {
			l, err := netlink.LinkByName(n)
			if err != nil {
				t.Fatal(err)
			}
			if err := netlink.LinkSetUp(l); err != nil {
				t.Fatal(err)
			}
		}
	}
	sw, err := net.InterfaceByName("sw0")
	if err != nil {
		t.Fatal(err)
	}
	tx, err := packet.Listen(sw, packet.Raw, lldp.EtherType, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	sent := []lldp.TLV{
		{Type: lldp.TypeChassisID, Value: []byte{4, 0x00, 0x11, 0x22, 0xaa, 0xbb, 0xcc}},
		{Type: lldp.TypePortID, Value: append([]byte{5}, "Ethernet1/7"...)},
		{Type: lldp.TypeTTL, Value: []byte{0, 120}},
		{Type: lldp.TypeSysName, Value: []byte("tor-a.rack1")},
	}
	dst := net.HardwareAddr{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}
	frame := append(append(append([]byte{}, dst...), sw.HardwareAddr...), 0x88, 0xcc)
	frame = append(frame, lldp.Encode(sent)...)
	other := append(append(append([]byte{}, dst...), sw.HardwareAddr...), 0x88, 0xb5, 1, 2, 3)
	go func() {
		for i := 0; i < 20; i++ { // until the listener is there
			time.Sleep(50 * time.Millisecond)
			_, _ = tx.WriteTo(other, &packet.Addr{HardwareAddr: dst})
			_, _ = tx.WriteTo(frame, &packet.Addr{HardwareAddr: dst})
		}
	}()
	start := time.Now()
	got, err := Collect(context.Background(), []string{"host0", "host1"}, 2*time.Second)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["host1"]; ok || len(got) != 1 {
		t.Fatalf("got %v, want host0 only", got)
	}
	tlvs := got["host0"]
	if len(tlvs) != len(sent) {
		t.Fatalf("host0 TLVs %v, want %v", tlvs, sent)
	}
	for i := range sent {
		if tlvs[i].Type != sent[i].Type || string(tlvs[i].Value) != string(sent[i].Value) {
			t.Fatalf("TLV %d: %v, want %v", i, tlvs[i], sent[i])
		}
	}
	if took > 10*time.Second {
		t.Fatalf("Collect took %v with a 2 s wait", took)
	}
	if p := lldp.Parse(tlvs); p["switch_port_id"] != "Ethernet1/7" {
		t.Fatalf("parsed %v", p)
	}
	if _, err := Collect(context.Background(), []string{"nope0"}, time.Second); err == nil {
		t.Fatal("unknown interface: no error")
	}
}

func TestFrame(t *testing.T) {
	pdu := lldp.Encode([]lldp.TLV{{Type: lldp.TypeTTL, Value: []byte{0, 1}}})
	eth := append(make([]byte, 12), 0x88, 0xcc)
	if tlvs, ok := Frame(append(eth, pdu...)); !ok || len(tlvs) != 1 {
		t.Fatalf("untagged: %v %v", tlvs, ok)
	}
	tagged := append(append(make([]byte, 12), 0x81, 0x00, 0, 100, 0x88, 0xcc), pdu...)
	if tlvs, ok := Frame(tagged); !ok || len(tlvs) != 1 {
		t.Fatalf("tagged: %v %v", tlvs, ok)
	}
	if _, ok := Frame(append(append(make([]byte, 12), 0x08, 0x00), pdu...)); ok {
		t.Fatal("IPv4 frame read as LLDP")
	}
}
