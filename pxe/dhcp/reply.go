package dhcp

import (
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// newReply starts a reply to req: header fields per RFC 2131 table 3 and
// the options every reply carries.
func (s *Server) newReply(req *dhcpv4.DHCPv4, typ dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	resp := &dhcpv4.DHCPv4{
		OpCode:        dhcpv4.OpcodeBootReply,
		HWType:        req.HWType,
		TransactionID: req.TransactionID,
		Flags:         req.Flags,
		ClientIPAddr:  zeroIP,
		YourIPAddr:    zeroIP,
		ServerIPAddr:  zeroIP,
		GatewayIPAddr: req.GatewayIPAddr,
		ClientHWAddr:  req.ClientHWAddr,
		Options:       make(dhcpv4.Options, 12), // a PXE answer's usual count: no growth, 576 B less than 16
	}
	if resp.GatewayIPAddr == nil {
		resp.GatewayIPAddr = zeroIP
	}
	resp.Options.Update(dhcpv4.OptMessageType(typ))
	resp.Options.Update(dhcpv4.OptServerIdentifier(s.serverIP))
	// RFC 3046: a relay agent's option 82 comes back to it unchanged.
	if v := req.GetOneOption(dhcpv4.OptionRelayAgentInformation); v != nil {
		resp.Options[dhcpv4.OptionRelayAgentInformation.Code()] = v
	}
	// RFC 6842: the client identifier is echoed.
	if v := req.GetOneOption(dhcpv4.OptionClientIdentifier); v != nil {
		resp.Options[dhcpv4.OptionClientIdentifier.Code()] = v
	}
	return resp
}

var zeroIP = []byte{0, 0, 0, 0}

// addLease adds the address options of full mode: 1, 3 (if configured),
// 28, 51, 58, 59. No option 6: the provisioning network has no DNS.
func (s *Server) addLease(resp *dhcpv4.DHCPv4) { s.addLeaseFor(resp, s.cfg.LeaseTime) }

// addLeaseFor is addLease with a lease time of lt.
func (s *Server) addLeaseFor(resp *dhcpv4.DHCPv4, lt time.Duration) {
	o := resp.Options
	o.Update(dhcpv4.OptSubnetMask(s.netmask))
	if s.sn.router != 0 {
		o.Update(dhcpv4.OptRouter(ipOf(s.sn.router)))
	}
	o.Update(dhcpv4.OptBroadcastAddress(ipOf(s.sn.broadcast())))
	o.Update(dhcpv4.OptIPAddressLeaseTime(lt))
	o.Update(dhcpv4.OptRenewTimeValue(lt / 2))
	o.Update(dhcpv4.OptRebindingTimeValue(lt * 7 / 8))
}

// addBoot adds the boot options for client c.
func (s *Server) addBoot(resp *dhcpv4.DHCPv4, c client, file string, httpBoot bool) {
	resp.ServerIPAddr = s.serverIP // siaddr = next-server (TFTP), even with no file
	if file != "" {
		// Option 67 when the client asked for it in its PRL (iPXE, EDK2),
		// else the BOOTP file field (udhcpc-like clients read only that), as
		// dnsmasq does (gotcha 8). The field holds 127 bytes + NUL: a longer
		// URL only fits in option 67. Option 67 is NUL-terminated like
		// dnsmasq's: some PXE ROMs expect it, none minds.
		if c.prl67 || len(file) > 127 {
			resp.Options[dhcpv4.OptionBootfileName.Code()] = append([]byte(file), 0)
		} else {
			resp.BootFileName = file
		}
	}
	if httpBoot {
		// UEFI HTTP boot only takes an offer that says HTTPClient (gotcha 10).
		resp.Options.Update(dhcpv4.OptClassIdentifier("HTTPClient"))
	}
	if c.ipxe && s.cfg.Mode == ModeFull {
		// iPXE "no-pxedhcp" (175.176 = 1): don't wait ~3 s for ProxyDHCP
		// offers before requesting (gotcha 2).
		resp.Options[optIPXEEncap] = []byte{optIPXENoPXEDHCP, 1, 1}
	}
}

// addProxy adds what a ProxyDHCP reply must carry for a PXE client: option
// 60 "PXEClient", PXE vendor options (43) saying "boot the file in this
// offer, no boot-server discovery or menu" (PXE_DISCOVERY_CONTROL = 8), and
// the client's UUID (97) echoed as the PXE spec asks.
func (s *Server) addProxy(resp, req *dhcpv4.DHCPv4, c client) {
	if !c.http {
		resp.Options.Update(dhcpv4.OptClassIdentifier("PXEClient"))
	}
	resp.Options[dhcpv4.OptionVendorSpecificInformation.Code()] = []byte{6, 1, 8, 255}
	if v := req.GetOneOption(dhcpv4.OptionClientMachineIdentifier); v != nil {
		resp.Options[dhcpv4.OptionClientMachineIdentifier.Code()] = v
	}
}

// nak builds a DHCPNAK (RFC 2131 table 3: no yiaddr, siaddr, lease options).
func (s *Server) nak(req *dhcpv4.DHCPv4, msg string) *dhcpv4.DHCPv4 {
	resp := s.newReply(req, dhcpv4.MessageTypeNak)
	resp.Options.Update(dhcpv4.OptMessage(msg))
	return resp
}
