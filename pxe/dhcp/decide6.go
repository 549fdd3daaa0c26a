package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"

	"castiron/fault"
	"castiron/pxe/boot"
)

// enterpriseEDK2 is the enterprise number (Intel) EDK2 puts in its vendor
// class; a UEFI HTTP boot client takes only an offer whose vendor class says
// "HTTPClient" (the DHCPv6 form of DHCPv4 option 60, lab NOTES gotcha 10).
const enterpriseEDK2 = 343

// request6 is one client message, taken out of its relay envelopes.
type request6 struct {
	msg   *dhcpv6.Message
	relay *dhcpv6.RelayMessage // the outermost envelope; nil when not relayed
	c     client
	mac   hwaddr
	hw    net.HardwareAddr
	dec   boot.Decision
}

// reply6Later is a Reply that may go out only once its lease is durable
// (Request, Renew, Rebind, Solicit with rapid commit).
type reply6Later struct {
	r     request6
	ia    *dhcpv6.OptIANA // the client's IA_NA (its IAID is echoed)
	old   netip.Addr      // an address the client asked for and loses
	lease Lease
}

// macOf finds the client's MAC: the link-layer address a relay added (RFC
// 6939), else the one in a DUID-LL or DUID-LLT, else the EUI-64 interface
// identifier of the link-local address it sent from. Firmware (EDK2) and
// iPXE send DUID-UUID, so for them the last is what tells the MAC.
func macOf(m *dhcpv6.Message, relayLLA net.HardwareAddr, peer netip.Addr) (net.HardwareAddr, string) {
	if len(relayLLA) == 6 {
		return relayLLA, "relay"
	}
	switch d := m.Options.ClientID().(type) {
	case *dhcpv6.DUIDLL:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr, "duid-ll"
		}
	case *dhcpv6.DUIDLLT:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr, "duid-llt"
		}
	}
	if peer.Is6() && peer.IsLinkLocalUnicast() {
		b := peer.As16()
		if b[11] == 0xff && b[12] == 0xfe {
			return net.HardwareAddr{b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]}, "eui64"
		}
	}
	return nil, ""
}

// unwrap takes the client message out of its relay envelopes and returns
// it with the link-layer address and peer address the innermost relay saw.
func unwrap(raw dhcpv6.DHCPv6, peer netip.Addr) (*dhcpv6.Message, *dhcpv6.RelayMessage, net.HardwareAddr, netip.Addr) {
	if m, ok := raw.(*dhcpv6.Message); ok {
		return m, nil, nil, peer
	}
	outer, ok := raw.(*dhcpv6.RelayMessage)
	if !ok || outer.Type() != dhcpv6.MessageTypeRelayForward {
		return nil, nil, nil, netip.Addr{}
	}
	r := outer
	for depth := 0; depth < 32; depth++ { // RFC 8415 HOP_COUNT_LIMIT
		inner := r.Options.RelayMessage()
		switch in := inner.(type) {
		case *dhcpv6.Message:
			_, lla := r.Options.ClientLinkLayerAddress()
			p, _ := netip.AddrFromSlice(r.PeerAddr)
			return in, outer, lla, p.Unmap()
		case *dhcpv6.RelayMessage:
			r = in
		default:
			return nil, nil, nil, netip.Addr{}
		}
	}
	return nil, nil, nil, netip.Addr{}
}

// decide is the decision for one packet: a reply to send now, or a lease to
// make durable first (later), or neither (no answer).
func (s *Server6) decide(ctx context.Context, raw dhcpv6.DHCPv6, peer netip.Addr) (dhcpv6.DHCPv6, *reply6Later, error) {
	msg, relay, lla, clientAddr := unwrap(raw, peer)
	if msg == nil {
		return nil, nil, nil
	}
	typ := msg.Type()
	switch typ {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRenew,
		dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline, dhcpv6.MessageTypeInformationRequest:
	default:
		return nil, nil, nil // a server's message, or one castiron does not serve
	}
	// RFC 8415 16: which messages must, and must not, name a server.
	sid := msg.Options.ServerID()
	switch typ {
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		if sid == nil || !sid.Equal(s.duid) {
			return nil, nil, nil
		}
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeRebind:
		if sid != nil {
			return nil, nil, nil
		}
	case dhcpv6.MessageTypeInformationRequest:
		if sid != nil && !sid.Equal(s.duid) {
			return nil, nil, nil
		}
	}
	if msg.Options.ClientID() == nil && typ != dhcpv6.MessageTypeInformationRequest {
		return nil, nil, nil
	}
	hw, how := macOf(msg, lla, clientAddr)
	if hw == nil {
		s.log.Debug("dhcp6: no MAC address in the request (no relay link-layer option, DUID-LL/LLT or EUI-64 source)", "peer", peer, "type", typ)
		return nil, nil, nil
	}
	r := request6{msg: msg, relay: relay, c: classify6(msg), hw: hw}
	copy(r.mac[:], hw)
	if r.mac == (hwaddr{}) || r.mac[0]&1 != 0 {
		return nil, nil, nil
	}
	if err := s.ensureLoaded(ctx, s.log, s.now()); err != nil {
		return nil, nil, err
	}
	dec, ok := s.gate.Allow(ctx, hw)
	if !ok {
		if s.quiet.allow(boot.DHCPIgnored, r.mac, s.now()) {
			s.log.Debug("dhcp6: not answering a machine the boot gate refused", "mac", hw.String(), "mac_from", how, "type", typ)
			s.rec.Record(ctx, boot.Event{MAC: hw.String(), Kind: boot.DHCPIgnored, Detail: "dhcp6: not allowed by the boot gate; " + typ.String()})
		}
		return nil, nil, nil
	}
	r.dec = dec
	switch typ {
	case dhcpv6.MessageTypeSolicit:
		s.record(ctx, r, boot.DHCPDiscover, netip.Addr{}, "")
		if msg.GetOneOption(dhcpv6.OptionRapidCommit) != nil {
			return s.grant(ctx, r)
		}
		return s.advertise(ctx, r)
	case dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind:
		s.record(ctx, r, boot.DHCPRequest, hint(msg.Options.OneIANA()), "")
		return s.grant(ctx, r)
	case dhcpv6.MessageTypeConfirm:
		return s.confirm(ctx, r), nil, nil
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		resp, err := s.giveBack(ctx, r)
		return resp, nil, err
	}
	// Information-request (stateless: RA with O=1 only): boot options.
	resp := s.newReply(r, dhcpv6.MessageTypeReply)
	file := s.addBoot(resp, r)
	s.record(ctx, r, boot.DHCPAck, netip.Addr{}, file)
	return s.wrap(r, resp)
}

// hint is the address the client's IA_NA asks for; zero when none.
func hint(ia *dhcpv6.OptIANA) netip.Addr {
	if ia == nil {
		return netip.Addr{}
	}
	if a := ia.Options.OneAddress(); a != nil {
		if ip, ok := netip.AddrFromSlice(a.IPv6Addr); ok {
			return ip.Unmap()
		}
	}
	return netip.Addr{}
}

// advertise answers a Solicit: the MAC's address (its own binding, else the
// one it asks for, else a free one), reserved for OfferHold, with
// preference 255 so the client requests it at once instead of waiting for
// other servers' advertisements (RFC 8415 18.2.1).
func (s *Server6) advertise(ctx context.Context, r request6) (dhcpv6.DHCPv6, *reply6Later, error) {
	resp := s.newReply(r, dhcpv6.MessageTypeAdvertise)
	resp.AddOption(dhcpv6.OptPreference(255))
	var offered netip.Addr
	if ia := r.msg.Options.OneIANA(); ia != nil {
		want, _ := s.key(hint(ia))
		k, ok := s.idx.offer(r.mac, want, s.now())
		if ok {
			offered = s.addr(k)
			resp.AddOption(s.iaWith(ia, offered, s.cfg.LeaseTime))
		} else {
			s.exhausted(ctx, r)
			resp.AddOption(iaStatus(ia, iana.StatusNoAddrsAvail, "no addresses available"))
		}
	}
	file := s.addBoot(resp, r)
	s.record(ctx, r, boot.DHCPOffer, offered, file)
	return s.wrap(r, resp)
}

// grant gives the MAC its address for a Request, Renew, Rebind or rapid-
// commit Solicit: the address the client asks for if it may have it, else
// its binding or a free one; the Reply goes out once the lease is durable.
func (s *Server6) grant(ctx context.Context, r request6) (dhcpv6.DHCPv6, *reply6Later, error) {
	ia := r.msg.Options.OneIANA()
	if ia == nil {
		// Only other configuration asked for (or an IA_TA/IA_PD castiron
		// does not serve): boot options, no address.
		resp := s.newReply(r, dhcpv6.MessageTypeReply)
		file := s.addBoot(resp, r)
		s.record(ctx, r, boot.DHCPAck, netip.Addr{}, file)
		return s.wrap(r, resp)
	}
	now := s.now()
	asked := hint(ia)
	var k uint64
	ok := false
	if want, in := s.key(asked); in && s.idx.claim(r.mac, want, now) {
		k, ok = want, true
	} else if k, ok = s.idx.offer(r.mac, 0, now); ok {
		ok = s.idx.claim(r.mac, k, now)
	}
	if !ok {
		s.exhausted(ctx, r)
		resp := s.newReply(r, dhcpv6.MessageTypeReply)
		resp.AddOption(iaStatus(ia, iana.StatusNoAddrsAvail, "no addresses available"))
		s.record(ctx, r, boot.DHCPNak, asked, "")
		return s.wrap(r, resp)
	}
	l := &reply6Later{r: r, ia: ia, lease: Lease{
		MAC: r.hw.String(), IP: s.addr(k), Expires: now.Add(s.cfg.LeaseTime), NodeUUID: r.dec.NodeUUID, UpdatedAt: now}}
	if asked.IsValid() && asked != l.lease.IP {
		l.old = asked
	}
	return nil, l, nil
}

// finish builds the Reply to a grant whose lease write ended with err.
func (s *Server6) finish(ctx context.Context, l *reply6Later, err error) (dhcpv6.DHCPv6, error) {
	resp := s.newReply(l.r, dhcpv6.MessageTypeReply)
	if l.r.msg.Type() == dhcpv6.MessageTypeSolicit {
		dhcpv6.WithRapidCommit(resp)
	}
	k, _ := s.key(l.lease.IP)
	lifetime := s.cfg.LeaseTime
	var conflict *LeaseConflictError
	switch {
	case err == nil:
		s.idx.committed(l.r.mac, k, l.lease.Expires, l.lease.UpdatedAt)
	case errors.As(err, &conflict):
		if _, ok := s.key(l.lease.IP); ok {
			holder, known := conflict.holder()
			s.idx.heldElsewhere(l.r.mac, k, holder, known, s.now().Add(s.cfg.LeaseTime))
		}
		resp.AddOption(iaStatus(l.ia, iana.StatusNoAddrsAvail, "address not available"))
		s.record(ctx, l.r, boot.DHCPNak, l.lease.IP, "")
		out, _, err := s.wrap(l.r, resp)
		return out, err
	default:
		// As in DHCPv4 (Server.finish): on a full disk a stored lease of
		// this address is granted for its stored remainder only.
		left := s.idx.durableUntil(l.r.mac, k).Sub(s.now()).Truncate(time.Second)
		if _, ok := s.key(l.lease.IP); !ok || !fault.Is(err, fault.StorageFull) || left < minFullDiskLease {
			return nil, fmt.Errorf("dhcp6: store lease %s -> %s: %w", l.r.hw, l.lease.IP, err)
		}
		s.log.Warn("dhcp6: disk full: lease granted for its stored remainder only",
			"mac", l.r.hw.String(), "ip", l.lease.IP, "left", left, "err", err)
		lifetime = left
	}
	ia := s.iaWith(l.ia, l.lease.IP, lifetime)
	if l.old.IsValid() {
		// RFC 8415 18.3.4/18.3.5: an address the client may no longer use
		// comes back with lifetimes 0.
		ia.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: l.old.AsSlice()})
	}
	resp.AddOption(ia)
	file := s.addBoot(resp, l.r)
	s.record(ctx, l.r, boot.DHCPAck, l.lease.IP, file)
	out, _, err := s.wrap(l.r, resp)
	return out, err
}

// confirm answers whether the client's addresses are still on this link
// (RFC 8415 18.3.3): every one in the range's /64, or NotOnLink.
func (s *Server6) confirm(ctx context.Context, r request6) dhcpv6.DHCPv6 {
	code, text := iana.StatusSuccess, "addresses on link"
	any := false
	for _, ia := range r.msg.Options.IANA() {
		for _, a := range ia.Options.Addresses() {
			ip, _ := netip.AddrFromSlice(a.IPv6Addr)
			any = true
			if _, ok := s.key(ip.Unmap()); !ok {
				code, text = iana.StatusNotOnLink, "address not on link"
			}
		}
	}
	if !any {
		return nil // nothing to confirm: RFC 8415 says no reply
	}
	resp := s.newReply(r, dhcpv6.MessageTypeReply)
	resp.AddOption(&dhcpv6.OptStatusCode{StatusCode: code, StatusMessage: text})
	s.record(ctx, r, boot.DHCPAck, netip.Addr{}, "")
	out, _, _ := s.wrap(r, resp)
	return out
}

// giveBack handles Release (the lease ends now; the address stays the MAC's
// until another machine needs it) and Decline (the address is in use by
// something else: quarantined, the binding forgotten).
func (s *Server6) giveBack(ctx context.Context, r request6) (dhcpv6.DHCPv6, error) {
	now := s.now()
	for _, ia := range r.msg.Options.IANA() {
		for _, a := range ia.Options.Addresses() {
			ip, _ := netip.AddrFromSlice(a.IPv6Addr)
			k, ok := s.key(ip.Unmap())
			if !ok {
				continue
			}
			if r.msg.Type() == dhcpv6.MessageTypeDecline {
				if s.idx.decline(r.mac, k, now) {
					s.log.Warn("dhcp6 decline: address in use by another host", "mac", r.hw.String(), "ip", ip)
					if err := s.store.DeleteLease(ctx, r.hw.String()); err != nil {
						return nil, err
					}
				}
				continue
			}
			if s.idx.release(r.mac, k, now) {
				if err := s.writer.put(ctx, Lease{MAC: r.hw.String(), IP: s.addr(k), Expires: now, NodeUUID: r.dec.NodeUUID, UpdatedAt: now}); err != nil {
					return nil, err
				}
			}
		}
	}
	resp := s.newReply(r, dhcpv6.MessageTypeReply)
	resp.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess, StatusMessage: "done"})
	out, _, err := s.wrap(r, resp)
	return out, err
}

// newReply starts an answer: same transaction, the client's DUID, ours.
func (s *Server6) newReply(r request6, typ dhcpv6.MessageType) *dhcpv6.Message {
	resp := &dhcpv6.Message{MessageType: typ, TransactionID: r.msg.TransactionID}
	if cid := r.msg.GetOneOption(dhcpv6.OptionClientID); cid != nil {
		resp.AddOption(cid)
	}
	resp.AddOption(dhcpv6.OptServerID(s.duid))
	return resp
}

// wrap puts resp in Relay-Reply envelopes when the request was relayed.
func (s *Server6) wrap(r request6, resp *dhcpv6.Message) (dhcpv6.DHCPv6, *reply6Later, error) {
	if r.relay == nil {
		return resp, nil, nil
	}
	out, err := dhcpv6.NewRelayReplFromRelayForw(r.relay, resp)
	return out, nil, err
}

// iaWith is the client's IA_NA holding addr for lifetime; T1/T2 at 50 % and
// 80 % (RFC 8415 21.4's recommendation).
func (s *Server6) iaWith(ia *dhcpv6.OptIANA, addr netip.Addr, lifetime time.Duration) *dhcpv6.OptIANA {
	out := &dhcpv6.OptIANA{IaId: ia.IaId, T1: lifetime / 2, T2: lifetime * 4 / 5}
	out.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: addr.AsSlice(), PreferredLifetime: lifetime, ValidLifetime: lifetime})
	return out
}

func iaStatus(ia *dhcpv6.OptIANA, code iana.StatusCode, text string) *dhcpv6.OptIANA {
	out := &dhcpv6.OptIANA{IaId: ia.IaId}
	out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: code, StatusMessage: text})
	return out
}

// addBoot adds the boot-file URL (option 59) for the client and returns it:
// the iPXE script for iPXE, tftp://[server]/file for PXE firmware, the HTTP
// URL (and vendor class HTTPClient) for UEFI HTTP boot, nothing for the
// agent.
func (s *Server6) addBoot(resp *dhcpv6.Message, r request6) string {
	file, httpBoot := s.cfg.BootFiles.file(r.c, r.hw)
	if file == "" {
		return ""
	}
	if !httpBoot && !r.c.ipxe {
		file = "tftp://[" + s.cfg.ServerAddr.String() + "]/" + file
	}
	resp.AddOption(dhcpv6.OptBootFileURL(file))
	if httpBoot {
		resp.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: enterpriseEDK2, Data: [][]byte{[]byte("HTTPClient")}})
	}
	return file
}

func (s *Server6) record(ctx context.Context, r request6, kind string, ip netip.Addr, file string) {
	recordEvent(ctx, s.rec, r.hw, r.dec, kind, ip, r.c, file, "dhcp6 ")
}

// exhausted logs an empty pool (error level, at most once a minute per MAC).
func (s *Server6) exhausted(ctx context.Context, r request6) {
	if !s.quiet.allow(boot.DHCPExhausted, r.mac, s.now()) {
		return
	}
	bound, live := s.idx.counts(s.now())
	pool := s.cfg.RangeStart.String() + "-" + s.cfg.RangeEnd.String()
	s.log.Error("dhcp6: address pool exhausted, machines get no address", "mac", r.hw.String(), "range", pool, "bound", bound, "live_leases", live)
	s.rec.Record(ctx, boot.Event{MAC: r.hw.String(), NodeUUID: r.dec.NodeUUID, Kind: boot.DHCPExhausted,
		Detail: fmt.Sprintf("dhcp6 range %s: %d bound, %d live leases", pool, bound, live)})
}

// classify6 reads what a DHCPv6 message says about its sender: vendor class
// (16) "PXEClient…", "HTTPClient…" or castiron's agent, architecture (61),
// user class (15) "iPXE". A client that asks for the boot-file URL and
// names an architecture is PXE firmware even without a vendor class.
func classify6(m *dhcpv6.Message) client {
	var c client
	for _, vc := range m.Options.VendorClasses() {
		for _, d := range vc.Data {
			c.vendorClass(string(d))
		}
	}
	archs := m.Options.ArchTypes()
	if len(archs) > 0 {
		c.archOption(uint16(archs[0]), true)
	} else {
		c.archOption(0, false)
	}
	if !c.agent && !c.http && c.hasArch && m.IsOptionRequested(dhcpv6.OptionBootfileURL) {
		c.pxe = true
	}
	for _, uc := range m.Options.UserClasses() {
		if string(uc) == "iPXE" {
			c.ipxe = !c.agent
		}
	}
	return c
}
