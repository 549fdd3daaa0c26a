package dhcp

import (
	"bytes"
	"context"
	"math/rand/v2"
	"net"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"castiron/pxe/boot"
)

// TestAppendPacketMatchesToBytes: the loops' encoder writes exactly what
// the library's ToBytes writes, for the server's own answers (every client
// profile, OFFER, ACK, NAK, relayed with option 82) and for random packets
// (random header fields and options, long values, option 82, pad and end
// codes in the map), appended after other bytes as in a round's buffer.
func TestAppendPacketMatchesToBytes(t *testing.T) {
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.250"), &allowGate{all: true}, openStore(t, ""), boot.Discard{}, nil)
	var pkts []*dhcpv4.DHCPv4
	relay := []dhcpv4.Modifier{dhcpv4.WithGatewayIP(net.IPv4(10, 201, 0, 2)), gen(82, []byte{1, 4, 'p', 'o', 'r', 't'})}
	for i, p := range []profile{ipxeBIOS, edk2PXE, ipxeEFI, edk2HTTP, agent, plain} {
		mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xe0, 0, byte(i)}
		offer, ack := dora(t, s, mac, p)
		pkts = append(pkts, offer, ack)
		mac[4] = 1
		offer, ack = dora(t, s, mac, p, relay...)
		pkts = append(pkts, offer, ack)
		nak, err := s.Reply(context.Background(), packet(t, dhcpv4.MessageTypeRequest, mac, p, requested(net.IPv4(192, 0, 2, 1))))
		if err != nil || nak == nil {
			t.Fatalf("NAK: %v %v", nak, err)
		}
		pkts = append(pkts, nak)
	}
	rng := rand.New(rand.NewPCG(15, 4))
	bytesOf := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for range 500 {
		d := &dhcpv4.DHCPv4{
			OpCode: dhcpv4.OpcodeBootReply, HWType: 1, HopCount: uint8(rng.Uint32()), NumSeconds: uint16(rng.Uint32()),
			Flags: uint16(rng.Uint32()), ClientHWAddr: bytesOf(rng.IntN(20)), Options: dhcpv4.Options{},
			ServerHostName: string(bytesOf(rng.IntN(80))), BootFileName: string(bytesOf(rng.IntN(150))),
		}
		copy(d.TransactionID[:], bytesOf(4))
		for _, ip := range []*net.IP{&d.ClientIPAddr, &d.YourIPAddr, &d.ServerIPAddr, &d.GatewayIPAddr} {
			switch rng.IntN(3) {
			case 0: // nil: zeros
			case 1:
				*ip = net.IP(bytesOf(4))
			case 2:
				*ip = net.IPv4(10, 201, byte(rng.Uint32()), byte(rng.Uint32()))
			}
		}
		for range rng.IntN(30) {
			d.Options[uint8(rng.Uint32())] = bytesOf([]int{0, 1, 4, 40, 300, 600}[rng.IntN(6)])
		}
		pkts = append(pkts, d)
	}
	buf := []byte("earlier answers")
	for i, d := range pkts {
		want := d.ToBytes()
		before := len(buf)
		buf = appendPacket(buf, d)
		if got := buf[before:]; !bytes.Equal(got, want) {
			t.Fatalf("packet %d (%s): appendPacket\n%x\nToBytes\n%x", i, d.Summary(), got, want)
		}
	}
	if !bytes.HasPrefix(buf, []byte("earlier answers")) {
		t.Fatal("appendPacket changed what was before it")
	}
}
