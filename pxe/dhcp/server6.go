package dhcp

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"golang.org/x/net/ipv6"

	"castiron/pxe/boot"
)

// DHCPv6 ports and the link-scoped multicast group servers listen on
// (RFC 8415 7.1, 7.2).
const (
	portClient6 = 546
	portServer6 = 547
)

var allDHCPServers = net.ParseIP("ff02::1:2")

// Config6 configures a Server6.
type Config6 struct {
	// Interface is the only interface the server listens and answers on.
	Interface string
	// ServerAddr is castiron's global (or ULA) address on the interface:
	// TFTP boot-file URLs name it.
	ServerAddr netip.Addr
	// ServerMAC makes the server's DUID (DUID-LL); default: the
	// interface's MAC.
	ServerMAC net.HardwareAddr
	// RangeStart..RangeEnd (inclusive) are the addresses handed out; they
	// lie in one /64 and hold at most 2^20 addresses.
	RangeStart, RangeEnd netip.Addr
	// LeaseTime is the addresses' valid and preferred lifetime (default
	// 1h); OfferHold how long an ADVERTISE reserves its address.
	LeaseTime, OfferHold time.Duration
	// BootFiles: TFTP file names become tftp://[ServerAddr]/name URLs;
	// ScriptURL and HTTPBootBase must name an IPv6 address (the client may
	// have no IPv4 at all).
	BootFiles
	// Workers reading port 547 (default 8).
	Workers int
	// Meter counts packets by type and answer (metrics); nil counts nothing.
	Meter boot.Meter
}

func (c *Config6) setDefaults() {
	if c.LeaseTime <= 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.OfferHold <= 0 {
		c.OfferHold = DefaultOfferHold
	}
	if c.Workers <= 0 {
		c.Workers = DefaultWorkers
	}
	if c.Meter == nil {
		c.Meter = boot.NoMeter{}
	}
	c.BootFiles.setDefaults()
}

func (c *Config6) validate() error {
	var errs []error
	if c.Interface == "" {
		errs = append(errs, errors.New("Interface is required"))
	}
	if !c.ServerAddr.Is6() || c.ServerAddr.Is4In6() || c.ServerAddr.IsLinkLocalUnicast() {
		errs = append(errs, fmt.Errorf("ServerAddr %v is not a global IPv6 address", c.ServerAddr))
	}
	if c.ScriptURL == nil {
		errs = append(errs, errors.New("ScriptURL is required"))
	}
	if len(c.ServerMAC) != 6 {
		errs = append(errs, fmt.Errorf("ServerMAC %v is not an Ethernet address", c.ServerMAC))
	}
	switch {
	case !c.RangeStart.Is6() || !c.RangeEnd.Is6() || c.RangeStart.Is4In6() || c.RangeEnd.Is4In6():
		errs = append(errs, fmt.Errorf("range %v-%v: want IPv6 addresses", c.RangeStart, c.RangeEnd))
	case hi64(c.RangeStart) != hi64(c.RangeEnd):
		errs = append(errs, fmt.Errorf("range %v-%v spans more than one /64", c.RangeStart, c.RangeEnd))
	case lo64(c.RangeEnd) < lo64(c.RangeStart):
		errs = append(errs, fmt.Errorf("range %v-%v is empty", c.RangeStart, c.RangeEnd))
	case lo64(c.RangeEnd)-lo64(c.RangeStart) >= maxRange:
		errs = append(errs, fmt.Errorf("range %v-%v is larger than %d addresses", c.RangeStart, c.RangeEnd, maxRange))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("dhcp6: config: %w", err)
	}
	return nil
}

func hi64(a netip.Addr) uint64 { b := a.As16(); return binary.BigEndian.Uint64(b[:8]) }
func lo64(a netip.Addr) uint64 { b := a.As16(); return binary.BigEndian.Uint64(b[8:]) }

// Server6 is the DHCPv6 server of an IPv6 provisioning network (stateful,
// RFC 8415): addresses from the range with durable leases, the boot-file
// URL (option 59) for PXE, iPXE and UEFI HTTP boot. Like the DHCPv4 server
// it keys leases on the MAC, so a machine keeps its address from firmware
// through iPXE to the ramdisk although each stage sends its own DUID, and it
// asks the boot gate first: a machine castiron was not asked to boot gets no
// answer. Make it with New6, start it with Run.
type Server6 struct {
	cfg  Config6
	hi   uint64 // upper 64 bits of the range's addresses
	duid dhcpv6.DUID
	gate boot.Gate
	rec  boot.Recorder
	log  *slog.Logger
	leaseState[uint64]
	quiet *throttle
	now   func() time.Time
	// listening is true while Run holds its socket (readiness).
	listening atomic.Bool
}

// Listening reports whether Run has bound its socket and is serving.
func (s *Server6) Listening() bool { return s.listening.Load() }

// New6 checks cfg and makes a server; the stored leases are loaded by Run
// (or the first Reply6).
func New6(cfg Config6, gate boot.Gate, leases LeaseStore, rec boot.Recorder, log *slog.Logger) (*Server6, error) {
	cfg.setDefaults()
	if cfg.ServerMAC == nil && cfg.Interface != "" {
		if ifi, err := net.InterfaceByName(cfg.Interface); err == nil {
			cfg.ServerMAC = ifi.HardwareAddr
		}
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if gate == nil || leases == nil {
		return nil, errors.New("dhcp6: a boot gate and a lease store are required")
	}
	rec, log = orDefaults(rec, log)
	s := &Server6{
		cfg: cfg, hi: hi64(cfg.RangeStart),
		duid: &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: cfg.ServerMAC},
		gate: gate, rec: rec, log: log.With("component", "dhcp6"),
		quiet: newThrottle(time.Minute, 16384), now: time.Now,
	}
	p := pool[uint64]{first: lo64(cfg.RangeStart), last: lo64(cfg.RangeEnd)}
	if hi64(cfg.ServerAddr) == s.hi {
		p.reserved[0] = lo64(cfg.ServerAddr)
	}
	s.leaseState = newLeaseState(p, cfg.OfferHold, leases, s.key)
	return s, nil
}

// key is the index key of a: its low 64 bits when it is in the range's /64.
func (s *Server6) key(a netip.Addr) (uint64, bool) {
	if !a.Is6() || a.Is4In6() || hi64(a) != s.hi {
		return 0, false
	}
	return lo64(a), true
}

// addr is the address of index key k.
func (s *Server6) addr(k uint64) netip.Addr {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], s.hi)
	binary.BigEndian.PutUint64(b[8:], k)
	return netip.AddrFrom16(b)
}

// Run serves until ctx is cancelled, then sends the replies still waiting
// for their lease's commit and returns. Socket and load errors are returned
// at once.
func (s *Server6) Run(ctx context.Context) error {
	if err := s.ensureLoaded(ctx, s.log, s.now()); err != nil {
		return err
	}
	conn, err := listenOn(ctx, s.cfg.Interface, "udp6", fmt.Sprintf("[::]:%d", portServer6))
	if err != nil {
		return fmt.Errorf("dhcp6: listen on %s port %d: %w", s.cfg.Interface, portServer6, err)
	}
	ifi, err := net.InterfaceByName(s.cfg.Interface)
	if err == nil {
		err = ipv6.NewPacketConn(conn).JoinGroup(ifi, &net.UDPAddr{IP: allDHCPServers})
	}
	if err != nil {
		conn.Close()
		return fmt.Errorf("dhcp6: join %s on %s: %w", allDHCPServers, s.cfg.Interface, err)
	}
	s.log.Info("dhcp6 server listening", "interface", s.cfg.Interface, "server", s.cfg.ServerAddr,
		"range", s.cfg.RangeStart.String()+"-"+s.cfg.RangeEnd.String())
	s.listening.Store(true)
	defer s.listening.Store(false)
	var wg sync.WaitGroup
	for range s.cfg.Workers {
		wg.Go(func() { s.serve(ctx, conn) })
	}
	<-ctx.Done()
	conn.SetReadDeadline(time.Now())
	wg.Wait()
	s.writer.wait()
	return conn.Close()
}

func (s *Server6) serve(ctx context.Context, conn *net.UDPConn) {
	readLoop(ctx, conn, s.log, s.cfg.Meter, func(pkt []byte, peer netip.AddrPort) { s.handle(ctx, conn, pkt, peer) })
}

func (s *Server6) handle(ctx context.Context, conn *net.UDPConn, pkt []byte, peer netip.AddrPort) {
	defer s.survive(peer)
	ctx = received(ctx, s.rec)
	// The message may outlive this read (a reply waiting for its lease's
	// commit) and the reader reuses its buffer.
	msg, err := dhcpv6.FromBytes(append([]byte(nil), pkt...))
	if err != nil {
		s.cfg.Meter.DHCPPacket("malformed", "none")
		s.log.Debug("dhcp6: malformed packet", "peer", peer, "err", err)
		return
	}
	send := func(resp dhcpv6.DHCPv6, err error) {
		answer := "none"
		switch {
		case err != nil:
			answer = "error"
		case resp != nil:
			answer = typeLabel6(resp)
		}
		s.cfg.Meter.DHCPPacket(typeLabel6(msg), answer)
		if err != nil {
			s.log.Warn("dhcp6: request not served", "peer", peer, "err", err)
			return
		}
		if resp == nil {
			return
		}
		// Relayed: back to the relay's server port; else to the client.
		dst := netip.AddrPortFrom(peer.Addr(), portClient6)
		if resp.IsRelay() {
			dst = netip.AddrPortFrom(peer.Addr(), portServer6)
		}
		if _, err := conn.WriteToUDPAddrPort(resp.ToBytes(), dst); err != nil {
			s.log.Warn("dhcp6: send", "to", dst, "err", err)
		}
	}
	resp, later, err := s.decide(ctx, msg, peer.Addr())
	if later != nil {
		s.writer.enqueue(ctx, later.lease, func(werr error) {
			defer s.survive(peer)
			send(s.finish(ctx, later, werr))
		})
		return
	}
	send(resp, err)
}

// typeLabel6 is a message's type as a metric label, the innermost one of
// a relayed message: "solicit", "advertise", ..., "other".
func typeLabel6(m dhcpv6.DHCPv6) string {
	if r, ok := m.(*dhcpv6.RelayMessage); ok {
		inner, err := r.GetInnerMessage()
		if err != nil {
			return "other"
		}
		m = inner
	}
	switch t := m.Type(); t {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeAdvertise, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeConfirm,
		dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeReply, dhcpv6.MessageTypeRelease,
		dhcpv6.MessageTypeDecline, dhcpv6.MessageTypeInformationRequest:
		return strings.ToLower(strings.ReplaceAll(t.String(), " ", "_"))
	}
	return "other"
}

func (s *Server6) survive(peer netip.AddrPort) {
	if r := recover(); r != nil {
		s.log.Error("dhcp6: panic handling a packet", "peer", peer, "panic", r)
	}
}

// Reply6 decides the answer to msg (a client message, or a Relay-Forward
// holding one) from peer: nil means no answer. An error means the request
// could not be served now (its lease could not be stored). It needs no
// socket; tests call it directly.
func (s *Server6) Reply6(ctx context.Context, msg dhcpv6.DHCPv6, peer netip.Addr) (dhcpv6.DHCPv6, error) {
	resp, later, err := s.decide(ctx, msg, peer)
	if later == nil || err != nil {
		return resp, err
	}
	return s.finish(ctx, later, s.writer.put(ctx, later.lease))
}

// MACForIP names the machine holding ip (leased or advertised), for the
// TFTP timeline. "" when unknown.
func (s *Server6) MACForIP(ip net.IP) string {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return ""
	}
	k, ok := s.key(a.Unmap())
	if !ok {
		return ""
	}
	return s.macFor(k)
}
