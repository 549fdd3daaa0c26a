package dhcp

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

func proxyConfig() Config {
	return Config{Interface: "test0", Mode: ModeProxy, ServerIP: testServer, BootFiles: BootFiles{ScriptURL: scriptURL}}
}

// TestProxyMode: ProxyDHCP answers only PXEClient, with boot options and
// never an address, on port 67 (OFFER) and 4011 (ACK to the sender).
func TestProxyMode(t *testing.T) {
	ctx := context.Background()
	mac := mustMAC("52:54:00:c9:00:01")
	s := newTestServer(t, proxyConfig(), gateFor(mac.String()), nil, &events{}, nil)
	for _, tc := range []struct {
		name string
		p    profile
		file string // "" = no answer
		ipxe bool
	}{
		{"iPXE BIOS ROM", ipxeBIOS, scriptURL(mac, "x86_64"), true},
		{"EDK2 PXEv4", edk2PXE, "snponly.efi", false},
		{"iPXE snponly.efi", ipxeEFI, scriptURL(mac, "x86_64"), true},
		{"EDK2 HTTP boot (not PXEClient)", edk2HTTP, "", false},
		{"agent", agent, "", false},
		{"plain client", plain, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, step := range []struct {
				typ  dhcpv4.MessageType
				port int
				want dhcpv4.MessageType
				mods []dhcpv4.Modifier
				dest string
			}{
				{dhcpv4.MessageTypeDiscover, portDHCP, dhcpv4.MessageTypeOffer, nil, bcast68},
				// The site server's offer was chosen: not ours to answer.
				{dhcpv4.MessageTypeRequest, portDHCP, dhcpv4.MessageTypeNone,
					[]dhcpv4.Modifier{serverID(net.IPv4(10, 201, 9, 9)), requested(net.IPv4(10, 201, 9, 20))}, ""},
				// The boot-server REQUEST to port 4011 from the configured client.
				{dhcpv4.MessageTypeRequest, portBootServer, dhcpv4.MessageTypeAck,
					[]dhcpv4.Modifier{dhcpv4.WithClientIP(net.IPv4(10, 201, 9, 20))}, "10.201.9.20:68"},
			} {
				req := packet(t, step.typ, mac, tc.p, step.mods...)
				var resp *dhcpv4.DHCPv4
				var err error
				if step.port == portBootServer {
					resp, err = s.ReplyBootServer(ctx, req)
				} else {
					resp, err = s.Reply(ctx, req)
				}
				if err != nil {
					t.Fatal(err)
				}
				if tc.file == "" || step.want == dhcpv4.MessageTypeNone {
					if resp != nil {
						t.Fatalf("%s on %d: answered %s", step.typ, step.port, resp.MessageType())
					}
					continue
				}
				if resp == nil || resp.MessageType() != step.want {
					t.Fatalf("%s on %d: %v, want %s", step.typ, step.port, resp, step.want)
				}
				got, err := dhcpv4.FromBytes(resp.ToBytes())
				if err != nil {
					t.Fatal(err)
				}
				if u32IP(got.YourIPAddr) != 0 || got.Options.Has(dhcpv4.OptionIPAddressLeaseTime) || got.Options.Has(dhcpv4.OptionSubnetMask) {
					t.Fatalf("proxy reply carries an address: yiaddr %v, options %v", got.YourIPAddr, got.Options)
				}
				if string(got.GetOneOption(dhcpv4.OptionBootfileName)) != tc.file+"\x00" || !got.ServerIPAddr.Equal(testServer.AsSlice()) {
					t.Fatalf("boot file %q from %v", got.GetOneOption(dhcpv4.OptionBootfileName), got.ServerIPAddr)
				}
				if got.ClassIdentifier() != "PXEClient" || string(got.GetOneOption(dhcpv4.OptionVendorSpecificInformation)) != "\x06\x01\x08\xff" {
					t.Fatalf("PXE options: 60 %q, 43 %x", got.ClassIdentifier(), got.GetOneOption(dhcpv4.OptionVendorSpecificInformation))
				}
				if got.Options.Has(dhcpv4.GenericOptionCode(175)) {
					t.Fatal("no-pxedhcp sent by the ProxyDHCP server itself")
				}
				if v := req.GetOneOption(dhcpv4.OptionClientMachineIdentifier); v != nil && string(got.GetOneOption(dhcpv4.OptionClientMachineIdentifier)) != string(v) {
					t.Fatal("option 97 not echoed")
				}
				peer := netip.MustParseAddrPort("10.201.9.20:68")
				if d := destination(req, resp, peer, step.port).String(); d != step.dest {
					t.Fatalf("sent to %s, want %s", d, step.dest)
				}
			}
		})
	}
	// An unknown MAC gets nothing in proxy mode either.
	if r, _ := s.Reply(ctx, packet(t, dhcpv4.MessageTypeDiscover, mustMAC("52:54:00:c9:00:02"), ipxeBIOS)); r != nil {
		t.Fatal("proxy answered a refused MAC")
	}
}

func TestConfigValidation(t *testing.T) {
	ok := fullConfig("10.201.0.10", "10.201.0.200")
	if _, err := New(ok, gateFor(), nil, nil, nil); err == nil {
		t.Error("full mode without a lease store accepted")
	}
	for name, mut := range map[string]func(c *Config){
		"no interface":   func(c *Config) { c.Interface = "" },
		"no server ip":   func(c *Config) { c.ServerIP = netip.Addr{} },
		"no script url":  func(c *Config) { c.ScriptURL = nil },
		"bad mode":       func(c *Config) { c.Mode = "relay" },
		"empty range":    func(c *Config) { c.RangeStart, c.RangeEnd = c.RangeEnd, c.RangeStart },
		"two subnets":    func(c *Config) { c.Netmask = net.CIDRMask(24, 32); c.RangeEnd = netip.MustParseAddr("10.201.1.5") },
		"network addr":   func(c *Config) { c.RangeStart = netip.MustParseAddr("10.201.0.0") },
		"bad mask":       func(c *Config) { c.Netmask = net.IPMask{255, 0, 255, 0} },
		"ipv6 range":     func(c *Config) { c.RangeStart = netip.MustParseAddr("fd00::1") },
		"too large":      func(c *Config) { c.Netmask = net.CIDRMask(8, 32); c.RangeEnd = netip.MustParseAddr("10.250.0.0") },
		"ipv6 router":    func(c *Config) { c.Router = netip.MustParseAddr("fd00::1") },
		"ipv6 server ip": func(c *Config) { c.ServerIP = netip.MustParseAddr("fd00::1") },
	} {
		c := ok
		mut(&c)
		if _, err := New(c, gateFor(), openStore(t, ""), nil, nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(proxyConfig(), gateFor(), nil, nil, nil); err != nil {
		t.Errorf("proxy mode: %v", err)
	}
}

func TestClassify(t *testing.T) {
	mac := mustMAC("52:54:00:c9:00:01")
	for _, tc := range []struct {
		name string
		p    profile
		want client
	}{
		{"iPXE BIOS", ipxeBIOS, client{arch: 0, hasArch: true, pxe: true, ipxe: true, prl67: true}},
		{"EDK2", edk2PXE, client{arch: 7, hasArch: true, pxe: true, prl67: true}},
		{"iPXE EFI (RFC 3004 user class)", ipxeEFI, client{arch: 7, hasArch: true, pxe: true, ipxe: true, prl67: true}},
		{"HTTP boot", edk2HTTP, client{arch: 16, hasArch: true, http: true, prl67: true}},
		{"agent", agent, client{agent: true}},
		{"agent with iPXE markers stays agent", func(m net.HardwareAddr) []dhcpv4.Modifier {
			return append(agent(m), gen(77, []byte("iPXE")))
		}, client{agent: true}},
		{"user class list", func(net.HardwareAddr) []dhcpv4.Modifier {
			return []dhcpv4.Modifier{gen(77, []byte("\x03foo\x04iPXE"))}
		}, client{ipxe: true}},
		{"truncated user class", func(net.HardwareAddr) []dhcpv4.Modifier {
			return []dhcpv4.Modifier{gen(77, []byte("\x09iPXE"))}
		}, client{}},
	} {
		if got := classify(packet(t, dhcpv4.MessageTypeDiscover, mac, tc.p)); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestDestination(t *testing.T) {
	mac := mustMAC("52:54:00:c9:00:01")
	ack := &dhcpv4.DHCPv4{Options: dhcpv4.Options{53: {byte(dhcpv4.MessageTypeAck)}}}
	nak := &dhcpv4.DHCPv4{Options: dhcpv4.Options{53: {byte(dhcpv4.MessageTypeNak)}}}
	peer := netip.MustParseAddrPort("10.201.3.3:4011")
	for _, tc := range []struct {
		name string
		mods []dhcpv4.Modifier
		resp *dhcpv4.DHCPv4
		port int
		want string
	}{
		{"relay", []dhcpv4.Modifier{dhcpv4.WithGatewayIP(net.IPv4(10, 201, 7, 1)), dhcpv4.WithClientIP(net.IPv4(10, 201, 0, 5))}, ack, portDHCP, "10.201.7.1:67"},
		{"relay NAK", []dhcpv4.Modifier{dhcpv4.WithGatewayIP(net.IPv4(10, 201, 7, 1))}, nak, portDHCP, "10.201.7.1:67"},
		{"NAK with ciaddr", []dhcpv4.Modifier{dhcpv4.WithClientIP(net.IPv4(10, 201, 0, 5))}, nak, portDHCP, bcast68},
		{"renewing", []dhcpv4.Modifier{dhcpv4.WithClientIP(net.IPv4(10, 201, 0, 5))}, ack, portDHCP, "10.201.0.5:68"},
		{"broadcast flag", []dhcpv4.Modifier{dhcpv4.WithBroadcast(true)}, ack, portDHCP, bcast68},
		{"no flag, no ciaddr", nil, ack, portDHCP, bcast68},
		{"boot server", []dhcpv4.Modifier{dhcpv4.WithClientIP(net.IPv4(10, 201, 3, 3))}, ack, portBootServer, "10.201.3.3:4011"},
	} {
		req := packet(t, dhcpv4.MessageTypeRequest, mac, nil, tc.mods...)
		if got := destination(req, tc.resp, peer, tc.port).String(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
