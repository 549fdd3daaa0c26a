package dhcp

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"

	"castiron/pxe/boot"
	"castiron/storage"
)

// expect is the golden shape of a reply.
type expect struct {
	none   bool   // no answer at all
	file   string // BOOTP file field
	opt67  string // option 67 without its NUL; "" = absent
	ipxe   bool   // option 175 with 176 = 1
	opt60  string // option 60 in the reply
	dest   string // where it is sent
	bcFlag bool   // broadcast flag echoed
}

func checkReply(t *testing.T, what string, s *Server, req, resp *dhcpv4.DHCPv4, typ dhcpv4.MessageType, w expect) {
	t.Helper()
	if w.none {
		if resp != nil {
			t.Fatalf("%s: answered %s, want silence", what, resp.MessageType())
		}
		return
	}
	if resp == nil {
		t.Fatalf("%s: no answer", what)
	}
	if resp.MessageType() != typ {
		t.Fatalf("%s: %s, want %s", what, resp.MessageType(), typ)
	}
	// Round trip through the wire format, as a client sees it.
	got, err := dhcpv4.FromBytes(resp.ToBytes())
	if err != nil {
		t.Fatalf("%s: reply does not parse: %v", what, err)
	}
	if got.OpCode != dhcpv4.OpcodeBootReply || got.TransactionID != req.TransactionID || got.ClientHWAddr.String() != req.ClientHWAddr.String() {
		t.Errorf("%s: header op=%v xid=%v chaddr=%v", what, got.OpCode, got.TransactionID, got.ClientHWAddr)
	}
	ip := u32IP(got.YourIPAddr)
	if ip < u32(netip.MustParseAddr("10.201.0.10")) || ip > u32(netip.MustParseAddr("10.201.0.200")) {
		t.Errorf("%s: yiaddr %v outside the range", what, got.YourIPAddr)
	}
	if !got.ServerIPAddr.Equal(testServer.AsSlice()) || !got.ServerIdentifier().Equal(testServer.AsSlice()) {
		t.Errorf("%s: siaddr %v, server id %v", what, got.ServerIPAddr, got.ServerIdentifier())
	}
	if got.BootFileName != w.file {
		t.Errorf("%s: file field %q, want %q", what, got.BootFileName, w.file)
	}
	o67 := got.GetOneOption(dhcpv4.OptionBootfileName)
	switch {
	case w.opt67 == "" && o67 != nil:
		t.Errorf("%s: option 67 %q, want none", what, o67)
	case w.opt67 != "" && string(o67) != w.opt67+"\x00":
		t.Errorf("%s: option 67 %q, want %q NUL-terminated", what, o67, w.opt67)
	}
	o175 := got.GetOneOption(dhcpv4.GenericOptionCode(175))
	if w.ipxe != (string(o175) == "\xb0\x01\x01") {
		t.Errorf("%s: option 175 %x, iPXE %v", what, o175, w.ipxe)
	}
	if vc := got.ClassIdentifier(); vc != w.opt60 {
		t.Errorf("%s: option 60 %q, want %q", what, vc, w.opt60)
	}
	// Full mode options: 1, 3, 28, 51, 54, 58, 59; never 6 (no DNS).
	if m := got.SubnetMask(); net.IP(m).String() != "255.255.0.0" {
		t.Errorf("%s: netmask %v", what, m)
	}
	if r := got.Router(); len(r) != 1 || !r[0].Equal(testRouter.AsSlice()) {
		t.Errorf("%s: router %v", what, r)
	}
	if b := got.BroadcastAddress(); !b.Equal(net.IPv4(10, 201, 255, 255)) {
		t.Errorf("%s: broadcast %v", what, b)
	}
	if lt := got.IPAddressLeaseTime(0); lt != time.Hour {
		t.Errorf("%s: lease time %v", what, lt)
	}
	if t1, t2 := got.IPAddressRenewalTime(0), got.IPAddressRebindingTime(0); t1 != 30*time.Minute || t2 != 52*time.Minute+30*time.Second {
		t.Errorf("%s: T1 %v T2 %v", what, t1, t2)
	}
	if got.Options.Has(dhcpv4.OptionDomainNameServer) {
		t.Errorf("%s: option 6 sent", what)
	}
	if got.IsBroadcast() != w.bcFlag {
		t.Errorf("%s: broadcast flag %v", what, got.IsBroadcast())
	}
	if d := destination(req, resp, netip.MustParseAddrPort("0.0.0.0:68"), portDHCP).String(); d != w.dest {
		t.Errorf("%s: sent to %s, want %s", what, d, w.dest)
	}
}

const bcast68 = "255.255.255.255:68"

// TestReplyGolden: each client of lab/NOTES.md's table through a full
// DISCOVER/OFFER/REQUEST/ACK in full mode.
func TestReplyGolden(t *testing.T) {
	long := "http://provisioning.example.test:8080/a/very/long/path/that/does/not/fit/in/the/bootp/file/field/of/one/hundred/twenty/seven/bytes.ipxe"
	relay := dhcpv4.WithGatewayIP(net.IPv4(10, 201, 7, 1))
	for _, tc := range []struct {
		name  string
		mac   string
		p     profile
		extra []dhcpv4.Modifier
		url   string // ScriptURL override
		w     expect
	}{
		{name: "iPXE BIOS ROM", mac: "52:54:00:c9:00:01", p: ipxeBIOS,
			w: expect{opt67: scriptURL(mustMAC("52:54:00:c9:00:01"), "x86_64"), ipxe: true, dest: bcast68}},
		{name: "EDK2 PXEv4, no option 61, broadcast flag", mac: "52:54:00:c9:00:02", p: edk2PXE,
			w: expect{opt67: "snponly.efi", dest: bcast68, bcFlag: true}},
		{name: "iPXE snponly.efi", mac: "52:54:00:c9:00:03", p: ipxeEFI,
			w: expect{opt67: scriptURL(mustMAC("52:54:00:c9:00:03"), "x86_64"), ipxe: true, dest: bcast68}},
		{name: "EDK2 HTTP boot", mac: "52:54:00:c9:00:04", p: edk2HTTP,
			w: expect{opt67: "http://10.201.0.1:8080/boot/snponly.efi", opt60: "HTTPClient", dest: bcast68, bcFlag: true}},
		{name: "ramdisk agent", mac: "52:54:00:c9:00:05", p: agent, w: expect{dest: bcast68}},
		{name: "plain client of an allowed MAC", mac: "52:54:00:c9:00:06", p: plain, w: expect{dest: bcast68}},
		{name: "unknown MAC refused", mac: "52:54:00:c9:00:ff", p: ipxeBIOS, w: expect{none: true}},
		{name: "relayed EDK2 (giaddr in the subnet)", mac: "52:54:00:c9:00:07", p: edk2PXE, extra: []dhcpv4.Modifier{relay},
			w: expect{opt67: "snponly.efi", dest: "10.201.7.1:67", bcFlag: true}},
		{name: "relayed from another subnet", mac: "52:54:00:c9:00:08", p: edk2PXE,
			extra: []dhcpv4.Modifier{dhcpv4.WithGatewayIP(net.IPv4(10, 202, 0, 1))}, w: expect{none: true}},
		{name: "BIOS PXE ROM (not iPXE), no PRL: file field", mac: "52:54:00:c9:00:09",
			p: func(net.HardwareAddr) []dhcpv4.Modifier {
				return []dhcpv4.Modifier{gen(60, []byte("PXEClient:Arch:00000:UNDI:002001"))} // arch from option 60
			}, w: expect{file: "undionly.kpxe", dest: bcast68}},
		{name: "arm64 UEFI", mac: "52:54:00:c9:00:0a",
			p: func(net.HardwareAddr) []dhcpv4.Modifier {
				return []dhcpv4.Modifier{gen(60, []byte("PXEClient:Arch:00011:UNDI:003000")), gen(93, []byte{0, 11}), gen(55, prlEDK2)}
			}, w: expect{opt67: "grubnetaa64.efi", dest: bcast68}},
		{name: "arm64 UEFI HTTP boot: an address, no boot file (GRUB has no http)", mac: "52:54:00:c9:00:0d",
			p: func(net.HardwareAddr) []dhcpv4.Modifier {
				return []dhcpv4.Modifier{gen(60, []byte("HTTPClient:Arch:00019:UNDI:003000")), gen(93, []byte{0, 19}),
					gen(55, []byte{1, 3, 6, 15, 28, 43, 60, 67}), dhcpv4.WithBroadcast(true)}
			}, w: expect{dest: bcast68, bcFlag: true}},
		{name: "iPXE without PRL, long URL only in option 67", mac: "52:54:00:c9:00:0b", url: long,
			p: func(net.HardwareAddr) []dhcpv4.Modifier { return []dhcpv4.Modifier{gen(77, []byte("iPXE"))} },
			w: expect{opt67: long, ipxe: true, dest: bcast68}},
		{name: "iPXE without PRL, short URL in the file field", mac: "52:54:00:c9:00:0c",
			p: func(net.HardwareAddr) []dhcpv4.Modifier { return []dhcpv4.Modifier{gen(175, []byte{0x13, 1, 1})} },
			w: expect{file: scriptURL(mustMAC("52:54:00:c9:00:0c"), ""), ipxe: true, dest: bcast68}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			cfg := fullConfig("10.201.0.10", "10.201.0.200")
			if tc.url != "" {
				cfg.ScriptURL = func(net.HardwareAddr, string) string { return tc.url }
			}
			rec := &events{}
			gate := gateFor("52:54:00:c9:00:01", "52:54:00:c9:00:02", "52:54:00:c9:00:03", "52:54:00:c9:00:04",
				"52:54:00:c9:00:05", "52:54:00:c9:00:06", "52:54:00:c9:00:07", "52:54:00:c9:00:08", "52:54:00:c9:00:09",
				"52:54:00:c9:00:0a", "52:54:00:c9:00:0b", "52:54:00:c9:00:0c", "52:54:00:c9:00:0d")
			st := openStore(t, "")
			s := newTestServer(t, cfg, gate, st, rec, nil)
			mac := mustMAC(tc.mac)

			disc := packet(t, dhcpv4.MessageTypeDiscover, mac, tc.p, tc.extra...)
			offer, err := s.Reply(ctx, disc)
			if err != nil {
				t.Fatal(err)
			}
			checkReply(t, "OFFER", s, disc, offer, dhcpv4.MessageTypeOffer, tc.w)
			if tc.w.none {
				if k := rec.kinds(mac.String()); len(k) > 1 || (len(k) == 1 && k[0] != boot.DHCPIgnored) {
					t.Fatalf("timeline of an ignored MAC: %v", k)
				}
				return
			}
			req := packet(t, dhcpv4.MessageTypeRequest, mac, tc.p, append(tc.extra, requested(offer.YourIPAddr), serverID(testServer.AsSlice()))...)
			ack, err := s.Reply(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			checkReply(t, "ACK", s, req, ack, dhcpv4.MessageTypeAck, tc.w)
			if !ack.YourIPAddr.Equal(offer.YourIPAddr) {
				t.Fatalf("ACK %v for OFFER %v", ack.YourIPAddr, offer.YourIPAddr)
			}
			// The lease is durable before the ACK is returned.
			l, err := st.GetLease(ctx, mac.String())
			if err != nil || l.IP.String() != offer.YourIPAddr.String() || !within(time.Until(l.Expires), time.Hour) {
				t.Fatalf("stored lease %+v, %v", l, err)
			}
			if l.NodeUUID != gate.ok[mac.String()] {
				t.Fatalf("lease node %q", l.NodeUUID)
			}
			if k := strings.Join(rec.kinds(mac.String()), ","); k != "dhcp_discover,dhcp_offer,dhcp_request,dhcp_ack" {
				t.Fatalf("timeline %s", k)
			}
			ev := rec.last(boot.DHCPAck)
			file := tc.w.opt67 + tc.w.file
			if !strings.HasPrefix(ev.Detail, "ip="+offer.YourIPAddr.String()+" arch=") || !strings.HasSuffix(ev.Detail, " file="+file) ||
				!strings.Contains(ev.Detail, " ipxe="+map[bool]string{true: "true", false: "false"}[tc.w.ipxe]) || ev.NodeUUID == "" {
				t.Fatalf("ack event %+v", ev)
			}
		})
	}
}

// TestSameAddressAcrossStages: firmware PXE (no option 61), iPXE (61) and the
// ramdisk agent of one machine get one address and one lease.
func TestSameAddressAcrossStages(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	mac := mustMAC("52:54:00:c9:00:01")
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.200"), gateFor(mac.String(), "52:54:00:c9:00:02"), st, &events{}, nil)
	dora(t, s, mustMAC("52:54:00:c9:00:02"), edk2PXE) // another machine first
	var first net.IP
	for _, p := range []profile{edk2PXE, ipxeEFI, agent, plain} {
		_, ack := dora(t, s, mac, p)
		if first == nil {
			first = ack.YourIPAddr
		}
		if !ack.YourIPAddr.Equal(first) {
			t.Fatalf("address changed from %v to %v", first, ack.YourIPAddr)
		}
	}
	ls, err := st.ListLeases(ctx)
	if err != nil || len(ls) != 2 {
		t.Fatalf("leases %+v %v", ls, err)
	}
}

// TestRequestStates: RFC 2131 4.3.2 through the decision function.
func TestRequestStates(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	a, b := mustMAC("52:54:00:c9:00:01"), mustMAC("52:54:00:c9:00:02")
	rec := &events{}
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.200"), gateFor(a.String(), b.String()), st, rec, nil)
	_, ackA := dora(t, s, a, plain)
	_, ackB := dora(t, s, b, plain)
	ipA, ipB := ackA.YourIPAddr, ackB.YourIPAddr

	// RENEWING: ciaddr, no 50/54: ACK, unicast to ciaddr, lease extended.
	before, _ := st.GetLease(ctx, a.String())
	time.Sleep(2 * time.Millisecond)
	renew := packet(t, dhcpv4.MessageTypeRequest, a, plain, dhcpv4.WithClientIP(ipA))
	ack, err := s.Reply(ctx, renew)
	if err != nil || ack.MessageType() != dhcpv4.MessageTypeAck || !ack.YourIPAddr.Equal(ipA) || !ack.ClientIPAddr.Equal(ipA) {
		t.Fatalf("renew: %v %v", ack, err)
	}
	if d := destination(renew, ack, netip.MustParseAddrPort(ipA.String()+":68"), portDHCP); d.String() != ipA.String()+":68" {
		t.Fatalf("renew ACK to %s", d)
	}
	if after, _ := st.GetLease(ctx, a.String()); !after.Expires.After(before.Expires) {
		t.Fatalf("renew did not extend: %v -> %v", before.Expires, after.Expires)
	}

	// INIT-REBOOT for B's address from A: NAK (broadcast), A keeps its lease
	// and its next DISCOVER gets it again.
	nak, err := s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, a, plain, requested(ipB)))
	if err != nil || nak.MessageType() != dhcpv4.MessageTypeNak || u32IP(nak.YourIPAddr) != 0 {
		t.Fatalf("request of a taken address: %v %v", nak, err)
	}
	if d := destination(packet(t, dhcpv4.MessageTypeRequest, a, plain), nak, netip.AddrPort{}, portDHCP); d.String() != bcast68 {
		t.Fatalf("NAK to %s", d)
	}
	offer, _ := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, a, plain))
	if !offer.YourIPAddr.Equal(ipA) {
		t.Fatalf("after NAK offered %v, want its lease %v", offer.YourIPAddr, ipA)
	}

	// INIT-REBOOT for another free address: ACK, the binding moves.
	free := net.IPv4(10, 201, 0, 150)
	ack, err = s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, a, plain, requested(free)))
	if err != nil || ack.MessageType() != dhcpv4.MessageTypeAck || !ack.YourIPAddr.Equal(free) {
		t.Fatalf("request of a free address: %v %v", ack, err)
	}
	if l, _ := st.GetLease(ctx, a.String()); l.IP.String() != free.String() {
		t.Fatalf("lease not moved: %+v", l)
	}

	// Wrong network: NAK.
	nak, _ = s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, a, plain, requested(net.IPv4(192, 168, 1, 5))))
	if nak == nil || nak.MessageType() != dhcpv4.MessageTypeNak {
		t.Fatalf("wrong network: %v", nak)
	}
	// The server itself and the router are never handed out.
	for _, ip := range []net.IP{testServer.AsSlice(), testRouter.AsSlice()} {
		nak, _ = s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, a, plain, requested(ip)))
		if nak == nil || nak.MessageType() != dhcpv4.MessageTypeNak {
			t.Fatalf("request of %v: %v", ip, nak)
		}
	}

	// SELECTING another server: silence, and the offer's reservation ends.
	c := mustMAC("52:54:00:c9:00:03")
	s.gate.(*allowGate).ok[c.String()] = ""
	offer, _ = s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, c, plain))
	other, err := s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, c, plain, requested(offer.YourIPAddr), serverID(net.IPv4(10, 201, 0, 2))))
	if other != nil || err != nil {
		t.Fatalf("answered a REQUEST for another server: %v %v", other, err)
	}
	if ip, _, _ := s.idx.lookup(hwaddrOf(c), time.Now()); ip != 0 {
		t.Fatalf("reservation kept: %v", addrOf(ip))
	}

	// RELEASE ends the lease, the address stays A's.
	if r, err := s.Reply(ctx, packet(t, dhcpv4.MessageTypeRelease, a, plain, dhcpv4.WithClientIP(free))); r != nil || err != nil {
		t.Fatalf("release: %v %v", r, err)
	}
	l, _ := st.GetLease(ctx, a.String())
	if time.Until(l.Expires) > 0 || l.IP.String() != free.String() {
		t.Fatalf("released lease %+v", l)
	}
	offer, _ = s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, a, plain))
	if !offer.YourIPAddr.Equal(free) {
		t.Fatalf("after release offered %v, want %v again", offer.YourIPAddr, free)
	}

	// DECLINE: the address is quarantined, the binding forgotten.
	if r, err := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDecline, b, plain, requested(ipB))); r != nil || err != nil {
		t.Fatalf("decline: %v %v", r, err)
	}
	if _, err := st.GetLease(ctx, b.String()); err == nil {
		t.Fatal("declined lease still stored")
	}
	offer, _ = s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, b, plain))
	if offer.YourIPAddr.Equal(ipB) {
		t.Fatal("declined address offered again")
	}

	// INFORM: configuration, no address, to ciaddr.
	inf := packet(t, dhcpv4.MessageTypeInform, a, ipxeBIOS, dhcpv4.WithClientIP(free))
	ack, _ = s.Reply(ctx, inf)
	if ack == nil || ack.MessageType() != dhcpv4.MessageTypeAck || u32IP(ack.YourIPAddr) != 0 || ack.Options.Has(dhcpv4.OptionIPAddressLeaseTime) {
		t.Fatalf("inform: %v", ack)
	}
	if d := destination(inf, ack, netip.AddrPort{}, portDHCP); d.String() != free.String()+":68" {
		t.Fatalf("inform ACK to %s", d)
	}
}

func hwaddrOf(hw net.HardwareAddr) (m hwaddr) {
	copy(m[:], hw)
	return m
}

// TestExhaustion: a full pool answers nothing, says so loudly and records
// it; an expired lease's address is reused, oldest first.
func TestExhaustion(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	rec := &events{}
	log := &testLog{}
	macs := []string{"52:54:00:c9:00:01", "52:54:00:c9:00:02", "52:54:00:c9:00:03"}
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.11"), gateFor(macs...), st, rec, log)
	now := time.Now()
	s.now = func() time.Time { return now }
	_, a1 := dora(t, s, mustMAC(macs[0]), plain)
	_, a2 := dora(t, s, mustMAC(macs[1]), plain)
	for range 3 {
		if r, err := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, mustMAC(macs[2]), plain)); r != nil || err != nil {
			t.Fatalf("exhausted pool answered %v %v", r, err)
		}
	}
	if ev := rec.last(boot.DHCPExhausted); ev.MAC != macs[2] || !strings.Contains(ev.Detail, "2 live leases") {
		t.Fatalf("exhaustion event %+v", ev)
	}
	if n := strings.Count(log.String(), "level=ERROR msg=\"dhcp: address pool exhausted"); n != 1 {
		t.Fatalf("%d exhaustion errors logged (want 1 a minute): %s", n, log.String())
	}
	// Both leases expire; the one that expired first is reused.
	now = now.Add(2 * time.Hour)
	if _, err := s.Reply(ctx, packet(t, dhcpv4.MessageTypeRequest, mustMAC(macs[1]), plain, dhcpv4.WithClientIP(a2.YourIPAddr))); err != nil {
		t.Fatal(err) // macs[1] renews: only macs[0]'s address is free
	}
	_, a3 := dora(t, s, mustMAC(macs[2]), plain)
	if !a3.YourIPAddr.Equal(a1.YourIPAddr) {
		t.Fatalf("reused %v, want the expired %v", a3.YourIPAddr, a1.YourIPAddr)
	}
	if _, err := st.GetLease(ctx, macs[0]); err == nil {
		t.Fatal("the taken-over lease is still stored")
	}
	// The machine that lost its address gets none now (both are live).
	if r, _ := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, mustMAC(macs[0]), plain)); r != nil {
		t.Fatalf("offered %v from a full pool", r.YourIPAddr)
	}
}

// TestOfferHoldLapses: an OFFER reserves its address only for OfferHold.
func TestOfferHoldLapses(t *testing.T) {
	ctx := context.Background()
	macs := []string{"52:54:00:c9:00:01", "52:54:00:c9:00:02"}
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.10"), gateFor(macs...), openStore(t, ""), nil, nil)
	now := time.Now()
	s.now = func() time.Time { return now }
	if r, _ := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, mustMAC(macs[0]), plain)); r == nil {
		t.Fatal("no offer")
	}
	if r, _ := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, mustMAC(macs[1]), plain)); r != nil {
		t.Fatal("a reserved address was offered twice")
	}
	now = now.Add(DefaultOfferHold + time.Second)
	if r, _ := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, mustMAC(macs[1]), plain)); r == nil {
		t.Fatal("the lapsed reservation was not reused")
	}
}

// TestRestartKeepsLeases: a new server on the same database offers each
// MAC its address, including one whose lease expired.
func TestRestartKeepsLeases(t *testing.T) {
	path := t.TempDir() + "/castiron.db"
	macs := []string{"52:54:00:c9:00:01", "52:54:00:c9:00:02", "52:54:00:c9:00:03"}
	got := map[string]string{}
	func() {
		st, err := storage.Open(context.Background(), path)
		if err != nil {
			t.Fatal(err)
		}
		s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.200"), gateFor(macs...), &sqliteLeases{st}, nil, nil)
		for _, m := range macs {
			_, ack := dora(t, s, mustMAC(m), edk2PXE)
			got[m] = ack.YourIPAddr.String()
		}
		if _, err := s.Reply(context.Background(), packet(t, dhcpv4.MessageTypeRelease, mustMAC(macs[2]), plain,
			dhcpv4.WithClientIP(net.ParseIP(got[macs[2]])))); err != nil {
			t.Fatal(err)
		}
		st.Close()
	}()
	st := openStore(t, path)
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.200"), gateFor(macs...), st, nil, nil)
	for _, m := range []string{macs[2], macs[1], macs[0]} { // reverse order: not just next-fit
		offer, err := s.Reply(context.Background(), packet(t, dhcpv4.MessageTypeDiscover, mustMAC(m), ipxeEFI))
		if err != nil || offer.YourIPAddr.String() != got[m] {
			t.Fatalf("%s after restart: %v %v, want %s", m, offer, err, got[m])
		}
	}
}

// TestIgnoredThrottled: a refused MAC gets no answer, and one timeline
// event a minute however often it asks.
func TestIgnoredThrottled(t *testing.T) {
	ctx := context.Background()
	rec := &events{}
	st := openStore(t, "")
	logs := &testLog{}
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.200"), gateFor(), st, rec, logs)
	now := time.Now()
	s.now = func() time.Time { return now }
	mac := mustMAC("52:54:00:c9:00:01")
	for i := range 5 {
		for _, typ := range []dhcpv4.MessageType{dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest} {
			if r, err := s.Reply(ctx, packet(t, typ, mac, ipxeBIOS, requested(net.IPv4(10, 201, 0, 10)))); r != nil || err != nil {
				t.Fatalf("answered a refused MAC: %v %v", r, err)
			}
		}
		if i == 2 {
			now = now.Add(61 * time.Second)
		}
	}
	if k := rec.kinds(mac.String()); len(k) != 2 || k[0] != boot.DHCPIgnored || k[1] != boot.DHCPIgnored {
		t.Fatalf("timeline %v", k)
	}
	if ls, err := st.ListLeases(ctx); err != nil || len(ls) != 0 {
		t.Fatalf("leases for a refused MAC: %+v %v", ls, err)
	}
	// The log names the MAC as an operator types it (not its raw bytes).
	if !strings.Contains(logs.String(), " mac="+mac.String()+" type=DISCOVER") {
		t.Fatalf("log line of a refused MAC: %s", logs)
	}
}

// TestConcurrentClients: many machines at once, some racing for the same
// requested address: every ACKed address is unique and is what is stored.
func TestConcurrentClients(t *testing.T) {
	ctx := context.Background()
	st := openStore(t, "")
	s := newTestServer(t, fullConfig("10.201.0.10", "10.201.0.200"), &allowGate{all: true}, st, &events{}, nil)
	const n = 64
	var mu sync.Mutex
	acked := map[string]string{} // ip -> mac
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xc9, 0x02, byte(i)}
			if i%2 == 0 {
				// INIT-REBOOT for an address another goroutine asks for too.
				req := packet(t, dhcpv4.MessageTypeRequest, mac, plain, requested(net.IPv4(10, 201, 0, byte(100+(i/2)%8))))
				r, err := s.Reply(ctx, req)
				if err != nil || r == nil {
					t.Errorf("%s: %v %v", mac, r, err)
					return
				}
				if r.MessageType() != dhcpv4.MessageTypeAck {
					return
				}
				mu.Lock()
				defer mu.Unlock()
				if prev, dup := acked[r.YourIPAddr.String()]; dup {
					t.Errorf("%s ACKed to %s and %s", r.YourIPAddr, prev, mac)
				}
				acked[r.YourIPAddr.String()] = mac.String()
				return
			}
			_, ack := dora(t, s, mac, ipxeBIOS)
			mu.Lock()
			defer mu.Unlock()
			if prev, dup := acked[ack.YourIPAddr.String()]; dup {
				t.Errorf("%s ACKed to %s and %s", ack.YourIPAddr, prev, mac)
			}
			acked[ack.YourIPAddr.String()] = mac.String()
		}()
	}
	wg.Wait()
	ls, err := st.ListLeases(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ls) != len(acked) {
		t.Fatalf("%d leases stored, %d ACKed", len(ls), len(acked))
	}
	for _, l := range ls {
		if acked[l.IP.String()] != l.MAC {
			t.Fatalf("stored %s -> %s, ACKed to %s", l.IP, l.MAC, acked[l.IP.String()])
		}
	}
	if len(acked) != n/2+8 {
		t.Fatalf("%d ACKs, want %d", len(acked), n/2+8)
	}
}
