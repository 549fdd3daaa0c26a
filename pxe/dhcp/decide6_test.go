package dhcp

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"castiron/pxe/boot"
)

// IPv6 test addresses: fd51:201::/64 belongs to this package's tests.
var (
	testServer6 = netip.MustParseAddr("fd51:201::1")
	testMAC6    = net.HardwareAddr{0x02, 0xc9, 0x06, 0, 0, 0xaa}
)

func config6() Config6 {
	return Config6{
		Interface:  "test0",
		ServerAddr: testServer6,
		ServerMAC:  testMAC6,
		RangeStart: netip.MustParseAddr("fd51:201::1000"),
		RangeEnd:   netip.MustParseAddr("fd51:201::10ff"),
		BootFiles: BootFiles{
			HTTPBootBase: "http://[fd51:201::1]:6385/boot/",
			ScriptURL: func(mac net.HardwareAddr, arch string) string {
				return "http://[fd51:201::1]:6385/boot/ipxe?mac=" + mac.String() + "&arch=" + arch
			},
		},
	}
}

func newServer6(t *testing.T, g boot.Gate, store LeaseStore, rec boot.Recorder) *Server6 {
	t.Helper()
	s, err := New6(config6(), g, store, rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// eui64 is the link-local address a NIC forms from its MAC (what EDK2 and
// iPXE send from).
func eui64(mac net.HardwareAddr) netip.Addr {
	b := [16]byte{0xfe, 0x80, 8: mac[0] ^ 2, 9: mac[1], 10: mac[2], 11: 0xff, 12: 0xfe, 13: mac[3], 14: mac[4], 15: mac[5]}
	return netip.AddrFrom16(b)
}

// msg6 builds a client message; each client of the table below is one
// set of options.
func msg6(t *testing.T, typ dhcpv6.MessageType, opts ...dhcpv6.Option) *dhcpv6.Message {
	t.Helper()
	m, err := dhcpv6.NewMessage()
	if err != nil {
		t.Fatal(err)
	}
	m.MessageType = typ
	for _, o := range opts {
		m.AddOption(o)
	}
	return m
}

func iaNA(id byte, addr netip.Addr) *dhcpv6.OptIANA {
	ia := &dhcpv6.OptIANA{IaId: [4]byte{0, 0, 0, id}}
	if addr.IsValid() {
		ia.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: addr.AsSlice()})
	}
	return ia
}

var duidUUID = &dhcpv6.DUIDUUID{UUID: [16]byte{0x6c, 0x61, 0x62, 0x30, 15: 1}}

// firmware is what EDK2's PXEv6 sends: DUID-UUID, arch 7, PXEClient vendor
// class, the boot-file URL in its option request.
func firmwareOpts() []dhcpv6.Option {
	return []dhcpv6.Option{
		dhcpv6.OptClientID(duidUUID),
		dhcpv6.OptClientArchType(iana.EFI_X86_64),
		&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte("PXEClient:Arch:00007:UNDI:003000")}},
		dhcpv6.OptRequestedOption(dhcpv6.OptionBootfileURL, dhcpv6.OptionBootfileParam),
	}
}

func ipxeOpts() []dhcpv6.Option {
	return []dhcpv6.Option{
		dhcpv6.OptClientID(duidUUID),
		dhcpv6.OptClientArchType(iana.INTEL_X86PC),
		&dhcpv6.OptUserClass{UserClasses: [][]byte{[]byte("iPXE")}},
		dhcpv6.OptRequestedOption(dhcpv6.OptionBootfileURL),
	}
}

func agentOpts(mac net.HardwareAddr) []dhcpv6.Option {
	return []dhcpv6.Option{
		dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac}),
		&dhcpv6.OptVendorClass{EnterpriseNumber: 0, Data: [][]byte{[]byte(AgentVendorClass)}},
	}
}

// reply6 runs msg through the server and parses the answer back from bytes.
func reply6(t *testing.T, s *Server6, msg dhcpv6.DHCPv6, peer netip.Addr) dhcpv6.DHCPv6 {
	t.Helper()
	resp, err := s.Reply6(context.Background(), msg, peer)
	if err != nil {
		t.Fatalf("Reply6: %v", err)
	}
	if resp == nil {
		return nil
	}
	got, err := dhcpv6.FromBytes(resp.ToBytes())
	if err != nil {
		t.Fatalf("reply does not parse: %v", err)
	}
	return got
}

func addrIn(t *testing.T, m *dhcpv6.Message) netip.Addr {
	t.Helper()
	ia := m.Options.OneIANA()
	if ia == nil || ia.Options.OneAddress() == nil {
		t.Fatalf("%s without an address: %s", m.Type(), m.Summary())
	}
	a, _ := netip.AddrFromSlice(ia.Options.OneAddress().IPv6Addr)
	if a.Less(netip.MustParseAddr("fd51:201::1000")) || netip.MustParseAddr("fd51:201::10ff").Less(a) {
		t.Fatalf("address %s outside the range", a)
	}
	return a
}

// TestServer6Stages: one machine through EDK2 PXEv6 (Solicit/Advertise/
// Request/Reply), iPXE (rapid commit) and the agent (DUID-LL): three DUIDs,
// one address, the right boot file for each stage, a durable lease.
func TestServer6Stages(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xc9, 0x06, 0x01}
	store := openStore(t, "").Leases6()
	rec := &events{}
	s := newServer6(t, gateFor(mac.String()), store, rec)
	peer := eui64(mac)

	adv := reply6(t, s, msg6(t, dhcpv6.MessageTypeSolicit, append(firmwareOpts(), iaNA(1, netip.Addr{}))...), peer).(*dhcpv6.Message)
	if adv.Type() != dhcpv6.MessageTypeAdvertise || adv.Options.Preference() != 255 {
		t.Fatalf("answer to the firmware's Solicit: %s", adv.Summary())
	}
	addr := addrIn(t, adv)
	if got := adv.Options.BootFileURL(); got != "tftp://[fd51:201::1]/snponly.efi" {
		t.Errorf("firmware boot file %q", got)
	}
	if sid := adv.Options.ServerID(); sid == nil || !sid.Equal(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: testMAC6}) {
		t.Errorf("server id %v", sid)
	}
	req := msg6(t, dhcpv6.MessageTypeRequest, append(firmwareOpts(), dhcpv6.OptServerID(adv.Options.ServerID()), iaNA(1, addr))...)
	rep := reply6(t, s, req, peer).(*dhcpv6.Message)
	if rep.Type() != dhcpv6.MessageTypeReply || addrIn(t, rep) != addr || rep.TransactionID != req.TransactionID {
		t.Fatalf("answer to the firmware's Request: %s", rep.Summary())
	}
	ia := rep.Options.OneIANA()
	if ia.T1 != 30*time.Minute || ia.T2 != 48*time.Minute || ia.Options.OneAddress().ValidLifetime != time.Hour {
		t.Errorf("lifetimes %s", ia)
	}
	if l, err := store.GetLease(context.Background(), mac.String()); err != nil || l.IP != addr || l.NodeUUID == "" {
		t.Fatalf("stored lease %+v %v", l, err)
	}

	// iPXE: rapid commit, answered by a Reply carrying the script.
	sol := msg6(t, dhcpv6.MessageTypeSolicit, append(ipxeOpts(), iaNA(2, netip.Addr{}))...)
	dhcpv6.WithRapidCommit(sol)
	rep = reply6(t, s, sol, peer).(*dhcpv6.Message)
	if rep.Type() != dhcpv6.MessageTypeReply || rep.GetOneOption(dhcpv6.OptionRapidCommit) == nil || addrIn(t, rep) != addr {
		t.Fatalf("answer to iPXE's rapid-commit Solicit: %s", rep.Summary())
	}
	if got, want := rep.Options.BootFileURL(), "http://[fd51:201::1]:6385/boot/ipxe?mac=52:54:00:c9:06:01&arch=x86_64"; got != want {
		t.Errorf("iPXE boot file %q, want %q", got, want)
	}
	if rep.Options.OneIANA().IaId != [4]byte{0, 0, 0, 2} {
		t.Errorf("IAID not echoed: %s", rep.Options.OneIANA())
	}

	// The agent: DUID-LL from another source address; no boot file.
	rep = reply6(t, s, msg6(t, dhcpv6.MessageTypeRebind, append(agentOpts(mac), iaNA(3, addr))...), netip.MustParseAddr("fe80::1234")).(*dhcpv6.Message)
	if addrIn(t, rep) != addr || rep.Options.BootFileURL() != "" {
		t.Fatalf("answer to the agent: %s", rep.Summary())
	}
	for _, want := range []string{boot.DHCPDiscover, boot.DHCPOffer, boot.DHCPRequest, boot.DHCPAck} {
		if !strings.Contains(strings.Join(rec.kinds(mac.String()), " "), want) {
			t.Errorf("timeline %v lacks %s", rec.kinds(mac.String()), want)
		}
	}
	if d := rec.last(boot.DHCPAck).Detail; !strings.HasPrefix(d, "dhcp6 ip="+addr.String()) {
		t.Errorf("timeline detail %q", d)
	}

	// A restarted server gives the MAC the same address from the store.
	s2 := newServer6(t, gateFor(mac.String()), store, nil)
	adv = reply6(t, s2, msg6(t, dhcpv6.MessageTypeSolicit, append(firmwareOpts(), iaNA(1, netip.Addr{}))...), peer).(*dhcpv6.Message)
	if addrIn(t, adv) != addr {
		t.Fatalf("after restart: %s", adv.Summary())
	}
	if got := s2.MACForIP(addr.AsSlice()); got != mac.String() {
		t.Errorf("MACForIP(%s) = %q", addr, got)
	}
}

// TestServer6Refusals: no answer to machines the gate refuses, to a client
// whose MAC cannot be told, to messages naming another server.
func TestServer6Refusals(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xc9, 0x06, 0x02}
	s := newServer6(t, gateFor(mac.String()), openStore(t, "").Leases6(), nil)
	other := net.HardwareAddr{0x52, 0x54, 0x00, 0xc9, 0x06, 0x03}
	for name, tc := range map[string]struct {
		msg  *dhcpv6.Message
		peer netip.Addr
	}{
		"gate refuses":             {msg6(t, dhcpv6.MessageTypeSolicit, append(firmwareOpts(), iaNA(1, netip.Addr{}))...), eui64(other)},
		"no MAC to be found":       {msg6(t, dhcpv6.MessageTypeSolicit, append(firmwareOpts(), iaNA(1, netip.Addr{}))...), netip.MustParseAddr("fe80::1")},
		"another server's request": {msg6(t, dhcpv6.MessageTypeRequest, append(agentOpts(mac), dhcpv6.OptServerID(duidUUID), iaNA(1, netip.Addr{}))...), eui64(mac)},
		"solicit naming a server":  {msg6(t, dhcpv6.MessageTypeSolicit, append(agentOpts(mac), dhcpv6.OptServerID(duidUUID))...), eui64(mac)},
		"no client id":             {msg6(t, dhcpv6.MessageTypeSolicit, iaNA(1, netip.Addr{})), eui64(mac)},
		"a server's message":       {msg6(t, dhcpv6.MessageTypeReply, agentOpts(mac)...), eui64(mac)},
	} {
		if resp := reply6(t, s, tc.msg, tc.peer); resp != nil {
			t.Errorf("%s: answered %s", name, resp.Type())
		}
	}
}

// TestServer6Relayed: a relayed Solicit is answered in a Relay-Reply, the
// MAC taken from the relay's client link-layer address option (RFC 6939).
func TestServer6Relayed(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xc9, 0x06, 0x04}
	s := newServer6(t, gateFor(mac.String()), openStore(t, "").Leases6(), nil)
	inner := msg6(t, dhcpv6.MessageTypeSolicit, append(firmwareOpts(), iaNA(1, netip.Addr{}))...)
	fwd, err := dhcpv6.EncapsulateRelay(inner, dhcpv6.MessageTypeRelayForward, net.ParseIP("fd51:201:7::1"), net.ParseIP("fe80::99"))
	if err != nil {
		t.Fatal(err)
	}
	fwd.AddOption(dhcpv6.OptClientLinkLayerAddress(iana.HWTypeEthernet, mac))
	fwd.AddOption(dhcpv6.OptInterfaceID([]byte("port7")))
	resp := reply6(t, s, fwd, netip.MustParseAddr("fd51:201:7::1"))
	rr, ok := resp.(*dhcpv6.RelayMessage)
	if !ok || rr.Type() != dhcpv6.MessageTypeRelayReply || !rr.PeerAddr.Equal(net.ParseIP("fe80::99")) || string(rr.Options.InterfaceID()) != "port7" {
		t.Fatalf("relayed answer %v", resp)
	}
	adv, err := rr.GetInnerMessage()
	if err != nil || adv.Type() != dhcpv6.MessageTypeAdvertise {
		t.Fatalf("inner %v %v", adv, err)
	}
	addrIn(t, adv)
}

// TestServer6HTTPBootAndInfo: UEFI HTTP boot gets the iPXE binary's URL
// and the HTTPClient vendor class; an Information-request (stateless) gets
// the boot file only.
func TestServer6HTTPBootAndInfo(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xc9, 0x06, 0x05}
	s := newServer6(t, gateFor(mac.String()), openStore(t, "").Leases6(), nil)
	http := msg6(t, dhcpv6.MessageTypeSolicit,
		dhcpv6.OptClientID(duidUUID), dhcpv6.OptClientArchType(iana.Arch(16)),
		&dhcpv6.OptVendorClass{EnterpriseNumber: 343, Data: [][]byte{[]byte("HTTPClient:Arch:00016:UNDI:003000")}},
		dhcpv6.OptRequestedOption(dhcpv6.OptionBootfileURL), iaNA(1, netip.Addr{}))
	adv := reply6(t, s, http, eui64(mac)).(*dhcpv6.Message)
	if got := adv.Options.BootFileURL(); got != "http://[fd51:201::1]:6385/boot/snponly.efi" {
		t.Errorf("HTTP boot file %q", got)
	}
	if vc := adv.Options.VendorClass(343); len(vc) != 1 || string(vc[0]) != "HTTPClient" {
		t.Errorf("vendor class %q", vc)
	}
	info := reply6(t, s, msg6(t, dhcpv6.MessageTypeInformationRequest, ipxeOpts()...), eui64(mac)).(*dhcpv6.Message)
	if info.Type() != dhcpv6.MessageTypeReply || info.Options.OneIANA() != nil || !strings.HasPrefix(info.Options.BootFileURL(), "http://[fd51:201::1]:6385/boot/ipxe?") {
		t.Errorf("information-request answer %s", info.Summary())
	}
}

// TestServer6ConfirmReleaseDecline: Confirm checks the link, Release ends
// the lease (the address stays the MAC's), Decline quarantines it.
func TestServer6ConfirmReleaseDecline(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0x00, 0xc9, 0x06, 0x06}
	store := openStore(t, "").Leases6()
	s := newServer6(t, gateFor(mac.String()), store, nil)
	ctx := context.Background()
	sol := msg6(t, dhcpv6.MessageTypeSolicit, append(agentOpts(mac), iaNA(1, netip.Addr{}))...)
	dhcpv6.WithRapidCommit(sol)
	addr := addrIn(t, reply6(t, s, sol, eui64(mac)).(*dhcpv6.Message))

	status := func(m dhcpv6.DHCPv6) iana.StatusCode {
		t.Helper()
		st := m.(*dhcpv6.Message).Options.Status()
		if st == nil {
			t.Fatalf("no status: %v", m)
		}
		return st.StatusCode
	}
	if c := status(reply6(t, s, msg6(t, dhcpv6.MessageTypeConfirm, append(agentOpts(mac), iaNA(1, addr))...), eui64(mac))); c != iana.StatusSuccess {
		t.Errorf("confirm on link: %s", c)
	}
	if c := status(reply6(t, s, msg6(t, dhcpv6.MessageTypeConfirm, append(agentOpts(mac), iaNA(1, netip.MustParseAddr("fd99::5")))...), eui64(mac))); c != iana.StatusNotOnLink {
		t.Errorf("confirm off link: %s", c)
	}
	sid := dhcpv6.OptServerID(s.duid)
	reply6(t, s, msg6(t, dhcpv6.MessageTypeRelease, append(agentOpts(mac), sid, iaNA(1, addr))...), eui64(mac))
	if l, err := store.GetLease(ctx, mac.String()); err != nil || l.IP != addr || l.Expires.After(time.Now()) {
		t.Fatalf("after release: %+v %v", l, err)
	}
	reply6(t, s, msg6(t, dhcpv6.MessageTypeDecline, append(agentOpts(mac), sid, iaNA(1, addr))...), eui64(mac))
	if _, err := store.GetLease(ctx, mac.String()); err == nil {
		t.Fatal("declined lease still stored")
	}
	sol = msg6(t, dhcpv6.MessageTypeSolicit, append(agentOpts(mac), iaNA(1, addr))...)
	if again := addrIn(t, reply6(t, s, sol, eui64(mac)).(*dhcpv6.Message)); again == addr {
		t.Fatalf("declined address %s offered again", addr)
	}
}

func TestConfig6Invalid(t *testing.T) {
	for name, mod := range map[string]func(*Config6){
		"link-local server": func(c *Config6) { c.ServerAddr = netip.MustParseAddr("fe80::1") },
		"two /64s":          func(c *Config6) { c.RangeEnd = netip.MustParseAddr("fd51:202::1") },
		"empty range":       func(c *Config6) { c.RangeStart, c.RangeEnd = c.RangeEnd, c.RangeStart },
		"IPv4 range":        func(c *Config6) { c.RangeStart = netip.MustParseAddr("10.0.0.1") },
		"no script":         func(c *Config6) { c.ScriptURL = nil },
		"huge range":        func(c *Config6) { c.RangeEnd = netip.MustParseAddr("fd51:201::ffff:ffff") },
	} {
		c := config6()
		mod(&c)
		if _, err := New6(c, gateFor(), openStore(t, "").Leases6(), nil, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
