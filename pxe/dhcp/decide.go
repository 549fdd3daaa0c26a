package dhcp

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"

	"castiron/fault"
	"castiron/pxe/boot"
)

// Server ports.
const (
	portDHCP       = 67
	portBootServer = 4011 // PXE boot server (ProxyDHCP REQUEST), proxy mode
	portClient     = 68
)

// Reply decides the answer to req received on port 67: nil means no answer.
// An error means the request could not be served now (its lease could not
// be stored); nothing is sent and the client retries. It needs no socket, so
// tests and fuzzing call it directly; Run calls it for every packet.
func (s *Server) Reply(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	return s.replySync(ctx, req, portDHCP)
}

// ReplyBootServer is Reply for a request received on port 4011 (the PXE boot
// server a ProxyDHCP client asks for its boot file; proxy mode only).
func (s *Server) ReplyBootServer(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, error) {
	return s.replySync(ctx, req, portBootServer)
}

// replySync is decide plus, for an ACK, waiting for its lease to be durable.
func (s *Server) replySync(ctx context.Context, req *dhcpv4.DHCPv4, port int) (*dhcpv4.DHCPv4, error) {
	resp, later, err := s.decide(ctx, req, port)
	if later == nil || err != nil {
		return resp, err
	}
	return s.finish(ctx, later, s.writer.put(ctx, later.lease))
}

// ackLater is a REQUEST's answer that may go out only once its lease is
// durable: the packet path queues the lease (leaseWriter) and sends the
// answer from finish when the commit is done, so no reader waits for disk.
type ackLater struct {
	req   *dhcpv4.DHCPv4
	c     client
	dec   boot.Decision
	mac   hwaddr
	hw    net.HardwareAddr
	lease Lease
}

// decide is the decision for one packet: a reply to send now, or a lease to
// make durable first (later), or neither (no answer).
func (s *Server) decide(ctx context.Context, req *dhcpv4.DHCPv4, port int) (resp *dhcpv4.DHCPv4, later *ackLater, err error) {
	if req == nil || req.OpCode != dhcpv4.OpcodeBootRequest || req.HWType != iana.HWTypeEthernet || len(req.ClientHWAddr) != 6 {
		return nil, nil, nil
	}
	typ := req.MessageType()
	switch typ {
	case dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeRelease,
		dhcpv4.MessageTypeDecline, dhcpv4.MessageTypeInform:
	default:
		return nil, nil, nil // BOOTP, or a server's message
	}
	var mac hwaddr
	copy(mac[:], req.ClientHWAddr)
	if mac == (hwaddr{}) || mac[0]&1 != 0 {
		return nil, nil, nil // no machine has a zero or multicast address
	}
	if s.cfg.Mode == ModeFull {
		if port != portDHCP {
			return nil, nil, nil
		}
		// Relayed from a link that is not the provisioning subnet: not ours.
		if gi := u32IP(req.GatewayIPAddr); gi != 0 && !s.sn.contains(gi) {
			return nil, nil, nil
		}
		if err := s.ensureLoaded(ctx, s.log, s.now()); err != nil {
			return nil, nil, err
		}
	}
	c := classify(req)
	if s.cfg.Mode == ModeProxy && !c.pxe {
		// Beside the site's server: the site's other machines are none of
		// our business, not even a timeline entry.
		return nil, nil, nil
	}
	hw := net.HardwareAddr(req.ClientHWAddr)
	dec, ok := s.gate.Allow(ctx, hw)
	if !ok {
		s.ignored(ctx, mac, hw, typ)
		return nil, nil, nil
	}
	if s.cfg.Mode == ModeProxy {
		return s.proxy(ctx, req, c, dec, hw, typ, port), nil, nil
	}
	switch typ {
	case dhcpv4.MessageTypeDiscover:
		return s.discover(ctx, req, c, dec, mac, hw), nil, nil
	case dhcpv4.MessageTypeRequest:
		resp, later := s.request(ctx, req, c, dec, mac, hw)
		return resp, later, nil
	case dhcpv4.MessageTypeRelease:
		return nil, nil, s.release(ctx, req, dec, mac, hw)
	case dhcpv4.MessageTypeDecline:
		return nil, nil, s.decline(ctx, req, mac, hw)
	case dhcpv4.MessageTypeInform:
		return s.inform(ctx, req, c, dec, hw), nil, nil
	}
	return nil, nil, nil
}

// discover answers DHCPDISCOVER with an OFFER. No ping before offering
// (gotcha 3: dnsmasq's 3 s probe delays every new machine): the network is
// castiron's own, and a DECLINE still catches a conflict.
func (s *Server) discover(ctx context.Context, req *dhcpv4.DHCPv4, c client, dec boot.Decision, mac hwaddr, hw net.HardwareAddr) *dhcpv4.DHCPv4 {
	s.record(ctx, hw, dec, boot.DHCPDiscover, 0, c, "")
	ip, ok := s.idx.offer(mac, u32IP(req.RequestedIPAddress()), s.now())
	if !ok {
		s.exhausted(ctx, hw, dec)
		return nil
	}
	resp := s.newReply(req, dhcpv4.MessageTypeOffer)
	resp.YourIPAddr = ipOf(ip)
	s.addLease(resp)
	file, httpBoot := s.cfg.BootFiles.file(c, hw)
	s.addBoot(resp, c, file, httpBoot)
	s.record(ctx, hw, dec, boot.DHCPOffer, ip, c, file)
	return resp
}

// request answers DHCPREQUEST (RFC 2131 4.3.2): a NAK now, or an ACK once
// the lease is durable (later). A MAC that has a binding keeps it through a
// NAK, so the DISCOVER that follows gets its own address offered again: a
// known machine is never left without an address.
func (s *Server) request(ctx context.Context, req *dhcpv4.DHCPv4, c client, dec boot.Decision, mac hwaddr, hw net.HardwareAddr) (*dhcpv4.DHCPv4, *ackLater) {
	now := s.now()
	sid := u32IP(req.ServerIdentifier())
	requested := u32IP(req.RequestedIPAddress())
	ciaddr := u32IP(req.ClientIPAddr)
	var want uint32
	switch {
	case sid != 0 && sid != s.server:
		// SELECTING another server's offer: free our reservation.
		s.idx.unhold(mac, now)
		return nil, nil
	case requested != 0: // SELECTING (ours) or INIT-REBOOT
		// A MAC we have no record of asking for a free address gets it
		// (RFC 2131 lets a server without a record stay silent; castiron
		// owns this network, and its database may be newer than the
		// client's memory).
		want = requested
	default: // RENEWING / REBINDING
		want = ciaddr
	}
	s.record(ctx, hw, dec, boot.DHCPRequest, want, c, "")
	if want == 0 {
		return nil, nil // malformed: no address asked for
	}
	if !s.sn.contains(want) {
		return s.nakWith(ctx, req, hw, dec, want, c, "wrong network"), nil
	}
	if !s.idx.claim(mac, want, now) {
		return s.nakWith(ctx, req, hw, dec, want, c, "address not available"), nil
	}
	// The ACK is sent only after the lease is durable; concurrent ACKs
	// share one transaction and commit (leaseWriter, storage's group commit).
	return nil, &ackLater{req: req, c: c, dec: dec, mac: mac, hw: hw, lease: Lease{
		MAC: hw.String(), IP: addrOf(want), Expires: now.Add(s.cfg.LeaseTime), NodeUUID: dec.NodeUUID, UpdatedAt: now}}
}

// finish builds the answer to a REQUEST whose lease write ended with err.
func (s *Server) finish(ctx context.Context, a *ackLater, err error) (*dhcpv4.DHCPv4, error) {
	ip := u32(a.lease.IP)
	if err != nil {
		var conflict *LeaseConflictError
		if errors.As(err, &conflict) {
			holder, known := conflict.holder()
			s.idx.heldElsewhere(a.mac, ip, holder, known, s.now().Add(s.cfg.LeaseTime))
			return s.nakWith(ctx, a.req, a.hw, a.dec, ip, a.c, "address not available"), nil
		}
		left := s.idx.durableUntil(a.mac, ip).Sub(s.now()).Truncate(time.Second)
		if !fault.Is(err, fault.StorageFull) || left < minFullDiskLease {
			return nil, fmt.Errorf("dhcp: store lease %s -> %s: %w", a.hw, a.lease.IP, err)
		}
		// The disk is full: the renewal cannot be stored, but this MAC's
		// lease of this address is, until its stored end. Acknowledge it for
		// what is left of that, no longer: nothing is promised that the
		// database does not hold, and known machines go on booting.
		s.log.Warn("dhcp: disk full: lease acknowledged for its stored remainder only",
			"mac", a.hw.String(), "ip", a.lease.IP, "left", left, "err", err)
		return s.ack(ctx, a, ip, left), nil
	}
	s.idx.committed(a.mac, ip, a.lease.Expires, a.lease.UpdatedAt)
	return s.ack(ctx, a, ip, s.cfg.LeaseTime), nil
}

// minFullDiskLease is the shortest remainder of a stored lease that is
// still acknowledged while the disk is full (a client renews at half of it).
const minFullDiskLease = time.Minute

// ack is the ACK of a, leasing ip for lt.
func (s *Server) ack(ctx context.Context, a *ackLater, ip uint32, lt time.Duration) *dhcpv4.DHCPv4 {
	resp := s.newReply(a.req, dhcpv4.MessageTypeAck)
	resp.ClientIPAddr = a.req.ClientIPAddr
	resp.YourIPAddr = ipOf(ip)
	s.addLeaseFor(resp, lt)
	file, httpBoot := s.cfg.BootFiles.file(a.c, a.hw)
	s.addBoot(resp, a.c, file, httpBoot)
	s.record(ctx, a.hw, a.dec, boot.DHCPAck, ip, a.c, file)
	return resp
}

func (s *Server) nakWith(ctx context.Context, req *dhcpv4.DHCPv4, hw net.HardwareAddr, dec boot.Decision, ip uint32, c client, why string) *dhcpv4.DHCPv4 {
	s.record(ctx, hw, dec, boot.DHCPNak, ip, c, "")
	s.log.Debug("dhcp nak", "mac", hw.String(), "ip", addrOf(ip), "reason", why)
	return s.nak(req, why)
}

// release ends the lease now (RFC 2131 4.3.4); the address stays the MAC's
// until another machine needs it.
func (s *Server) release(ctx context.Context, req *dhcpv4.DHCPv4, dec boot.Decision, mac hwaddr, hw net.HardwareAddr) error {
	now := s.now()
	ip := u32IP(req.ClientIPAddr)
	if !s.idx.release(mac, ip, now) {
		return nil
	}
	s.log.Debug("dhcp release", "mac", hw.String(), "ip", addrOf(ip))
	return s.writer.put(ctx, Lease{MAC: hw.String(), IP: addrOf(ip), Expires: now, NodeUUID: dec.NodeUUID, UpdatedAt: now})
}

// decline: the client found its address in use by something else
// (RFC 2131 4.3.3). The address is quarantined and the binding forgotten.
func (s *Server) decline(ctx context.Context, req *dhcpv4.DHCPv4, mac hwaddr, hw net.HardwareAddr) error {
	ip := u32IP(req.RequestedIPAddress())
	if !s.idx.decline(mac, ip, s.now()) {
		return nil
	}
	s.log.Warn("dhcp decline: address in use by another host", "mac", hw.String(), "ip", addrOf(ip))
	return s.store.DeleteLease(ctx, hw.String())
}

// inform answers DHCPINFORM: configuration and boot options, no address.
func (s *Server) inform(ctx context.Context, req *dhcpv4.DHCPv4, c client, dec boot.Decision, hw net.HardwareAddr) *dhcpv4.DHCPv4 {
	resp := s.newReply(req, dhcpv4.MessageTypeAck)
	resp.ClientIPAddr = req.ClientIPAddr
	resp.Options.Update(dhcpv4.OptSubnetMask(s.netmask))
	if s.sn.router != 0 {
		resp.Options.Update(dhcpv4.OptRouter(ipOf(s.sn.router)))
	}
	file, httpBoot := s.cfg.BootFiles.file(c, hw)
	s.addBoot(resp, c, file, httpBoot)
	s.record(ctx, hw, dec, boot.DHCPAck, u32IP(req.ClientIPAddr), c, file)
	return resp
}

// proxy answers a PXE client (option 60 "PXEClient", which iPXE sends too)
// beside the site's DHCP server (ProxyDHCP): boot options only, never an
// address. On port 67 a DISCOVER gets a proxy OFFER
// (and a REQUEST naming us an ACK); on port 4011 the client's REQUEST for its
// boot file gets an ACK.
func (s *Server) proxy(ctx context.Context, req *dhcpv4.DHCPv4, c client, dec boot.Decision, hw net.HardwareAddr, typ dhcpv4.MessageType, port int) *dhcpv4.DHCPv4 {
	var out dhcpv4.MessageType
	switch {
	case port == portDHCP && typ == dhcpv4.MessageTypeDiscover:
		s.record(ctx, hw, dec, boot.DHCPDiscover, 0, c, "")
		out = dhcpv4.MessageTypeOffer
	case port == portDHCP && typ == dhcpv4.MessageTypeRequest && u32IP(req.ServerIdentifier()) == s.server,
		port == portBootServer && (typ == dhcpv4.MessageTypeRequest || typ == dhcpv4.MessageTypeInform):
		s.record(ctx, hw, dec, boot.DHCPRequest, 0, c, "")
		out = dhcpv4.MessageTypeAck
	default:
		return nil
	}
	file, httpBoot := s.cfg.BootFiles.file(c, hw)
	if file == "" {
		return nil
	}
	resp := s.newReply(req, out)
	if out == dhcpv4.MessageTypeAck {
		resp.ClientIPAddr = req.ClientIPAddr
	}
	s.addBoot(resp, c, file, httpBoot)
	s.addProxy(resp, req, c)
	kind := boot.DHCPOffer
	if out == dhcpv4.MessageTypeAck {
		kind = boot.DHCPAck
	}
	s.record(ctx, hw, dec, kind, 0, c, file)
	return resp
}

// record adds a timeline event (recordEvent).
func (s *Server) record(ctx context.Context, hw net.HardwareAddr, dec boot.Decision, kind string, ip uint32, c client, file string) {
	var addr netip.Addr
	if ip != 0 {
		addr = addrOf(ip)
	}
	recordEvent(ctx, s.rec, hw, dec, kind, addr, c, file, "")
}

// recordEvent adds a timeline event: "[dhcp6 ]ip=.. arch=.. ipxe=.. file=..".
func recordEvent(ctx context.Context, rec boot.Recorder, hw net.HardwareAddr, dec boot.Decision, kind string, ip netip.Addr, c client, file, prefix string) {
	if _, off := rec.(boot.Discard); off {
		return
	}
	addr := "-"
	if ip.IsValid() {
		addr = ip.String()
	}
	arch := "-"
	switch {
	case c.agent:
		arch = "agent"
	case c.hasArch:
		arch = strconv.Itoa(int(c.arch))
	}
	detail := prefix + "ip=" + addr + " arch=" + arch + " ipxe=" + strconv.FormatBool(c.ipxe)
	ev := boot.Event{MAC: hw.String(), NodeUUID: dec.NodeUUID, Kind: kind}
	switch kind {
	case boot.DHCPOffer, boot.DHCPAck:
		detail += " file=" + file
		ev.Took = boot.SinceReceived(ctx)
	case boot.DHCPNak:
		ev.Took = boot.SinceReceived(ctx)
	}
	ev.Detail = detail
	rec.Record(ctx, ev)
}

// received notes the packet's arrival in ctx, so that the answer's
// timeline event carries castiron's time for it (parse, gate, decision,
// lease commit); not when nothing is recorded.
func received(ctx context.Context, rec boot.Recorder) context.Context {
	return arrived(ctx, rec, time.Time{})
}

// arrived is received for a packet the kernel received at (zero: now):
// castiron's time then includes the packet's wait in the socket queue,
// such as a busy loop's coalescing window.
func arrived(ctx context.Context, rec boot.Recorder, at time.Time) context.Context {
	if _, off := rec.(boot.Discard); off {
		return ctx
	}
	if at.IsZero() {
		at = time.Now()
	}
	return boot.WithReceived(ctx, at)
}

// ignored records, at most once a minute per MAC, that the gate refused it.
func (s *Server) ignored(ctx context.Context, mac hwaddr, hw net.HardwareAddr, typ dhcpv4.MessageType) {
	if !s.quiet.allow(boot.DHCPIgnored, mac, s.now()) {
		return
	}
	s.log.Debug("dhcp: not answering a machine the boot gate refused", "mac", hw.String(), "type", typ.String())
	s.rec.Record(ctx, boot.Event{MAC: hw.String(), Kind: boot.DHCPIgnored, Detail: "not allowed by the boot gate; " + typ.String()})
}

// exhausted reports an empty pool loudly: an error log line at most every
// 10 s (a boot storm must not flood the log) and a timeline event once a
// minute per MAC.
func (s *Server) exhausted(ctx context.Context, hw net.HardwareAddr, dec boot.Decision) {
	var mac hwaddr
	copy(mac[:], hw)
	now := s.now()
	s.exhaustedCount.Add(1)
	logIt := s.loud.allow(boot.DHCPExhausted, hwaddr{}, now)
	recordIt := s.quiet.allow(boot.DHCPExhausted, mac, now)
	if !logIt && !recordIt {
		return
	}
	bound, live := s.idx.counts(now)
	pool := fmt.Sprintf("%s-%s", s.cfg.RangeStart, s.cfg.RangeEnd)
	if logIt {
		s.log.Error("dhcp: address pool exhausted, machines get no address",
			"mac", hw.String(), "range", pool, "bound", bound, "live_leases", live, "refused_total", s.exhaustedCount.Load())
	}
	if recordIt {
		s.rec.Record(ctx, boot.Event{MAC: hw.String(), NodeUUID: dec.NodeUUID, Kind: boot.DHCPExhausted,
			Detail: fmt.Sprintf("range %s: %d bound, %d live leases", pool, bound, live)})
	}
}
