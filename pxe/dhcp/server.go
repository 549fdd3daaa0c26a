package dhcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"golang.org/x/net/ipv4"

	"castiron/pxe/boot"
)

// Server is the DHCP server. Make it with New, start it with Run.
type Server struct {
	cfg                Config
	sn                 subnet
	server             uint32 // ServerIP
	serverIP           net.IP
	netmask            net.IPMask
	gate               boot.Gate
	rec                boot.Recorder
	log                *slog.Logger
	leaseState[uint32]           // full mode only (idx nil in proxy mode)
	quiet              *throttle // timeline events, per MAC
	loud               *throttle // error log lines, server-wide
	// exhaustedCount counts DISCOVERs refused for lack of an address.
	exhaustedCount atomic.Int64
	now            func() time.Time

	// listening is true while Run holds its sockets (readiness).
	listening atomic.Bool
}

// Listening reports whether Run has bound its sockets and is serving.
func (s *Server) Listening() bool { return s.listening.Load() }

// New checks cfg and makes a server. leases may be nil in proxy mode. The
// stored leases are loaded by Run (or the first Reply).
func New(cfg Config, gate boot.Gate, leases LeaseStore, rec boot.Recorder, log *slog.Logger) (*Server, error) {
	cfg.setDefaults()
	sn, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	if gate == nil {
		return nil, errors.New("dhcp: a boot gate is required")
	}
	if cfg.Mode == ModeFull && leases == nil {
		return nil, errors.New("dhcp: full mode needs a lease store")
	}
	rec, log = orDefaults(rec, log)
	s := &Server{
		cfg: cfg, sn: sn, server: u32(cfg.ServerIP), serverIP: ipOf(u32(cfg.ServerIP)),
		gate: gate, rec: rec, log: log.With("component", "dhcp", "mode", string(cfg.Mode)),
		quiet: newThrottle(time.Minute, 16384), loud: newThrottle(10*time.Second, 16), now: time.Now,
	}
	if cfg.Mode == ModeFull {
		s.netmask = net.IPMask(ipOf(sn.mask))
		p := pool[uint32]{first: sn.first, last: sn.last, reserved: [2]uint32{sn.server, sn.router}}
		s.leaseState = newLeaseState(p, cfg.OfferHold, leases, func(a netip.Addr) (uint32, bool) { return u32(a), a.Is4() })
	}
	return s, nil
}

// orDefaults: no recorder keeps nothing, no logger is slog's default.
func orDefaults(rec boot.Recorder, log *slog.Logger) (boot.Recorder, *slog.Logger) {
	if rec == nil {
		rec = boot.Discard{}
	}
	if log == nil {
		log = slog.Default()
	}
	return rec, log
}

// Run serves until ctx is cancelled, then sends the ACKs still waiting for
// their commit, closes its sockets and returns. Socket and load errors are
// returned at once.
func (s *Server) Run(ctx context.Context) error {
	if err := s.ensureLoaded(ctx, s.log, s.now()); err != nil {
		return err
	}
	ports := []int{portDHCP}
	if s.cfg.Mode == ModeProxy {
		ports = append(ports, portBootServer)
	}
	var conns []*net.UDPConn
	closeAll := func() {
		for _, c := range conns {
			c.Close()
		}
	}
	for _, p := range ports {
		c, err := listen(ctx, s.cfg.Interface, p)
		if err != nil {
			closeAll()
			return fmt.Errorf("dhcp: listen on %s port %d: %w", s.cfg.Interface, p, err)
		}
		conns = append(conns, c)
	}
	s.log.Info("dhcp server listening", "interface", s.cfg.Interface, "server_ip", s.cfg.ServerIP, "ports", ports)
	s.listening.Store(true)
	defer s.listening.Store(false)

	var wg sync.WaitGroup
	for i, c := range conns {
		n := s.cfg.Workers
		if ports[i] == portBootServer {
			n = 1
		}
		rd := &reader{conn: c, pc: ipv4.NewPacketConn(c)}
		for range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.newBatchLoop(rd, ports[i]).run(ctx)
			}()
		}
	}
	<-ctx.Done()
	// Stop reading, let the ACKs whose leases are being committed go out,
	// then close.
	for _, c := range conns {
		c.SetReadDeadline(time.Now())
	}
	wg.Wait()
	if s.writer != nil {
		s.writer.wait()
	}
	closeAll()
	return nil
}

// readLoop hands each packet read from conn to handle until the socket is
// closed (or ctx ends and reads fail). pkt is reused by the next read. A
// packet that waited in the receive queue longer than maxQueueWait is
// dropped unanswered (counted as "stale").
func readLoop(ctx context.Context, conn *net.UDPConn, log *slog.Logger, meter boot.Meter, handle func(pkt []byte, peer netip.AddrPort)) {
	buf := make([]byte, 4096)
	oob := make([]byte, oobSpace)
	for {
		n, oobn, _, peer, err := conn.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if errors.Is(err, net.ErrClosed) || ctx.Err() != nil {
				return
			}
			log.Warn("dhcp: read", "err", err)
			time.Sleep(10 * time.Millisecond) // don't spin on a persistent error
			continue
		}
		if at := receivedAt(oob[:oobn]); !at.IsZero() && time.Since(at) > maxQueueWait {
			meter.DHCPPacket("stale", "none")
			continue
		}
		handle(buf[:n], peer)
	}
}

// survive: fuzzing found no panic, but one bad packet must never take the
// server down.
func (s *Server) survive(peer netip.AddrPort) {
	if r := recover(); r != nil {
		s.log.Error("dhcp: panic handling a packet", "peer", peer, "panic", r)
	}
}

// count reports one handled packet to the meter: its type, and the answer
// (the reply's type, "none", or "error" when it could not be served).
func (s *Server) count(req, resp *dhcpv4.DHCPv4, err error) {
	answer := "none"
	switch {
	case err != nil:
		answer = "error"
	case resp != nil:
		answer = typeLabel(resp.MessageType())
	}
	s.cfg.Meter.DHCPPacket(typeLabel(req.MessageType()), answer)
}

// typeLabel is a message type as a metric label: "discover", "offer", ...,
// or "other" (BOOTP, unknown types), so any packet maps to a few labels.
func typeLabel(t dhcpv4.MessageType) string {
	switch t {
	case dhcpv4.MessageTypeDiscover, dhcpv4.MessageTypeOffer, dhcpv4.MessageTypeRequest, dhcpv4.MessageTypeDecline,
		dhcpv4.MessageTypeAck, dhcpv4.MessageTypeNak, dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeInform:
		return strings.ToLower(t.String())
	}
	return "other"
}

// destination is where a reply goes (RFC 2131 4.1):
//   - to port 4011 requests: back to the sender (PXE boot server);
//   - giaddr set: to the relay, giaddr:67;
//   - NAK, or ciaddr unset: broadcast 255.255.255.255:68 on the interface.
//     RFC 2131 wants a unicast to yiaddr/chaddr when the broadcast bit is
//     clear, which for a client without an address needs a raw socket or
//     ARP-cache injection; broadcasting is allowed ("MAY") and every client
//     in lab/NOTES.md takes it, so castiron always broadcasts there;
//   - ciaddr set (RENEWING, INFORM): unicast to ciaddr:68.
func destination(req, resp *dhcpv4.DHCPv4, peer netip.AddrPort, port int) netip.AddrPort {
	bcast := netip.AddrPortFrom(netip.AddrFrom4([4]byte{255, 255, 255, 255}), portClient)
	if port == portBootServer {
		return peer
	}
	if gi := u32IP(req.GatewayIPAddr); gi != 0 {
		return netip.AddrPortFrom(addrOf(gi), portDHCP)
	}
	if resp.MessageType() == dhcpv4.MessageTypeNak {
		return bcast
	}
	if ci := u32IP(req.ClientIPAddr); ci != 0 {
		return netip.AddrPortFrom(addrOf(ci), portClient)
	}
	return bcast
}

// MACForIP names the machine holding ip (leased or offered), for the TFTP
// timeline: TFTP requests carry no MAC. "" when unknown or in proxy mode.
func (s *Server) MACForIP(ip net.IP) string {
	a, ok := netip.AddrFromSlice(ip.To4())
	if !ok {
		return ""
	}
	return s.macFor(u32(a))
}

// LeaseUsage reports the pool's addresses in use and free (metrics); both
// are 0 in proxy mode, which hands out no addresses.
func (s *Server) LeaseUsage() (inUse, free int) {
	if s.cfg.Mode != ModeFull || s.idx == nil {
		return 0, 0
	}
	return s.idx.usage(s.now())
}
