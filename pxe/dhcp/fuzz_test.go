package dhcp

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// FuzzDecide feeds arbitrary bytes through the parser and the decision
// function of a full-mode and a proxy-mode server that allow every MAC.
// Nothing may panic; a reply must encode and parse, answer the request's
// transaction, and a proxy reply never carries an address.
func FuzzDecide(f *testing.F) {
	mac := mustMAC("52:54:00:c9:00:01")
	for _, p := range []profile{ipxeBIOS, edk2PXE, ipxeEFI, edk2HTTP, agent, plain} {
		for _, typ := range []dhcpv4.MessageType{dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeRelease,
			dhcpv4.MessageTypeDecline, dhcpv4.MessageTypeInform} {
			f.Add(packet(f, typ, mac, p, requested(net.IPv4(10, 201, 0, 10))).ToBytes(), false)
		}
		f.Add(packet(f, dhcpv4.MessageTypeRequest, mac, p, dhcpv4.WithClientIP(net.IPv4(10, 201, 0, 11)),
			dhcpv4.WithGatewayIP(net.IPv4(10, 201, 7, 1))).ToBytes(), true)
	}
	full := newTestServer(f, fullConfig("10.201.0.10", "10.201.0.40"), &allowGate{all: true}, openStore(f, ""), &events{}, nil)
	proxy := newTestServer(f, proxyConfig(), &allowGate{all: true}, nil, &events{}, nil)
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, pkt []byte, bootServerPort bool) {
		req, err := dhcpv4.FromBytes(pkt)
		if err != nil {
			return
		}
		port := portDHCP
		if bootServerPort {
			port = portBootServer
		}
		for _, s := range []*Server{full, proxy} {
			resp, err := s.replySync(ctx, req, port)
			if err != nil || resp == nil {
				continue
			}
			back, err := dhcpv4.FromBytes(resp.ToBytes())
			if err != nil {
				t.Fatalf("%s reply does not parse: %v\n%s", s.cfg.Mode, err, resp.Summary())
			}
			if back.TransactionID != req.TransactionID || back.OpCode != dhcpv4.OpcodeBootReply {
				t.Fatalf("%s reply to another transaction", s.cfg.Mode)
			}
			if s.cfg.Mode == ModeProxy && u32IP(back.YourIPAddr) != 0 {
				t.Fatalf("proxy reply with yiaddr %v", back.YourIPAddr)
			}
			if s.cfg.Mode == ModeFull && back.MessageType() == dhcpv4.MessageTypeAck && u32IP(back.YourIPAddr) != 0 {
				if ip := u32IP(back.YourIPAddr); ip < full.sn.first || ip > full.sn.last {
					t.Fatalf("ACK outside the range: %v", back.YourIPAddr)
				}
			}
			_ = destination(req, resp, netip.MustParseAddrPort("10.201.0.99:68"), port)
		}
	})
}
