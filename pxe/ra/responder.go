// Package ra answers IPv6 Router Solicitations on the provisioning
// interface with a Router Advertisement.
//
// On an IPv4-only provisioning network the RA configures nothing: iPXE
// configures IPv4 (DHCP) and IPv6 (router discovery) together and finishes
// only when both are done, so without a router the IPv6 side times out after
// ~13 s on every iPXE start (lab NOTES gotcha 1). An RA with router lifetime
// 0, M=0, O=0 and no prefix ("no router here, nothing to configure") ends
// that wait at once and hands out no address or route.
//
// On an IPv6 provisioning network where castiron is the only router-ish
// thing, the RA says M=1 (addresses by DHCPv6), O=1, and carries the
// on-link prefix, so hosts reach castiron's address directly; router
// lifetime stays 0 (castiron routes nothing). Where the site has a router,
// that router's RAs do this and castiron's responder is off.
package ra

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

// minInterval is the least time between two RAs. Solicitations arriving
// faster (a rack booting at once) share one multicast RA, so a flood of
// RSs cannot make us flood the link. RFC 4861's 3 s would delay iPXE.
const minInterval = 100 * time.Millisecond

// sendRetry and sendTries cover the start-up window in which the
// interface's link-local address does not exist yet or is still tentative.
const (
	sendRetry = 250 * time.Millisecond
	sendTries = 20
)

// periodic is the interval of unsolicited RAs when the RA configures
// something (RFC 4861 MaxRtrAdvInterval is 600 s by default; hosts that
// sent no solicitation learn of a prefix sooner, and its lifetimes are
// refreshed long before they end).
const periodic = 200 * time.Second

var (
	allNodes   = net.ParseIP("ff02::1")
	allRouters = net.ParseIP("ff02::2")
)

// Responder answers Router Solicitations on one interface.
type Responder struct {
	ifi *net.Interface
	adv Advert
	log *slog.Logger
	// listening is true while Run holds its socket (readiness).
	listening atomic.Bool
}

// Listening reports whether Run has opened its socket and is answering.
func (r *Responder) Listening() bool { return r.listening.Load() }

// New looks the interface up; Run starts answering with adv (its zero value
// is the empty RA).
func New(iface string, adv Advert, log *slog.Logger) (*Responder, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, fmt.Errorf("ra: interface %q: %w", iface, err)
	}
	if log == nil {
		log = slog.Default()
	}
	if _, err := adv.marshal(ifi.HardwareAddr); err != nil {
		return nil, err
	}
	return &Responder{ifi: ifi, adv: adv, log: log.With("iface", iface)}, nil
}

// Run sends one unsolicited RA, then answers solicitations until ctx ends
// (and repeats the RA every periodic when it configures something).
// Socket errors (e.g. not permitted without CAP_NET_RAW) return at once.
func (r *Responder) Run(ctx context.Context) error {
	pc, err := r.listen(ctx)
	if err != nil {
		return err
	}
	ra, err := r.adv.marshal(r.ifi.HardwareAddr)
	if err != nil {
		return err
	}

	solicited := make(chan net.Addr, 16)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer pc.Close() // ends the reader
	wg.Go(func() { r.readSolicitations(pc, solicited) })

	var (
		lastSent time.Time
		pending  = true // the unsolicited RA at start
		failures int
		timer    = time.NewTimer(0)
	)
	defer timer.Stop()
	var tick <-chan time.Time
	if r.adv.configures() {
		t := time.NewTicker(periodic)
		defer t.Stop()
		tick = t.C
	}
	r.log.Info("router advertisement responder running", "managed", r.adv.Managed, "other", r.adv.Other, "prefixes", r.adv.Prefixes)
	r.listening.Store(true)
	defer r.listening.Store(false)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			if !pending {
				pending = true
				timer.Reset(0)
			}
		case from := <-solicited:
			r.log.Debug("router solicitation", "from", from.String())
			if !pending {
				pending = true
				timer.Reset(max(0, time.Until(lastSent.Add(minInterval))))
			}
		case <-timer.C:
			if err := r.send(pc, ra); err != nil {
				failures++
				if failures < sendTries {
					timer.Reset(sendRetry)
					continue
				}
				r.log.Warn("router advertisement not sent", "err", err, "tries", failures)
			} else {
				r.log.Debug("router advertisement sent")
			}
			failures = 0
			pending = false
			lastSent = time.Now()
		}
	}
}

// listen opens a raw ICMPv6 socket bound to the interface that sees only
// Router Solicitations and sends with hop limit 255 (RFC 4861 requires it;
// receivers drop NDP packets with any other hop limit).
func (r *Responder) listen(ctx context.Context) (*ipv6.PacketConn, error) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = unix.SetsockoptString(int(fd), unix.SOL_SOCKET, unix.SO_BINDTODEVICE, r.ifi.Name)
		})
		return errors.Join(err, serr)
	}}
	conn, err := lc.ListenPacket(ctx, "ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, fmt.Errorf("ra: listen on %s: %w", r.ifi.Name, err)
	}
	pc := ipv6.NewPacketConn(conn)
	var filter ipv6.ICMPFilter
	filter.SetAll(true)
	filter.Accept(ipv6.ICMPTypeRouterSolicitation)
	err = errors.Join(
		pc.SetICMPFilter(&filter),
		pc.SetMulticastHopLimit(255),
		pc.SetHopLimit(255),
		pc.SetMulticastInterface(r.ifi),
		pc.SetMulticastLoopback(false),
		pc.JoinGroup(r.ifi, &net.IPAddr{IP: allRouters}),
		pc.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagInterface, true),
	)
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("ra: socket options on %s: %w", r.ifi.Name, err)
	}
	return pc, nil
}

// readSolicitations passes valid RSs on until the socket is closed. A full
// channel drops the RS: an RA is already due and answers it too.
func (r *Responder) readSolicitations(pc *ipv6.PacketConn, out chan<- net.Addr) {
	buf := make([]byte, 1500)
	for {
		n, cm, src, err := pc.ReadFrom(buf)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				r.log.Warn("router solicitation read failed", "err", err)
			}
			return
		}
		if cm == nil || cm.HopLimit != 255 || cm.IfIndex != r.ifi.Index || !isRouterSolicitation(buf[:n]) {
			continue
		}
		select {
		case out <- src:
		default:
		}
	}
}

// send multicasts the RA to all nodes from the interface's link-local
// address (hosts ignore RAs from any other source).
func (r *Responder) send(pc *ipv6.PacketConn, ra []byte) error {
	src, err := r.linkLocal()
	if err != nil {
		return err
	}
	cm := &ipv6.ControlMessage{HopLimit: 255, Src: src, IfIndex: r.ifi.Index}
	_, err = pc.WriteTo(ra, cm, &net.IPAddr{IP: allNodes, Zone: r.ifi.Name})
	return err
}

func (r *Responder) linkLocal() (net.IP, error) {
	addrs, err := r.ifi.Addrs()
	if err != nil {
		return nil, err
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() == nil && ipn.IP.IsLinkLocalUnicast() {
			return ipn.IP, nil
		}
	}
	return nil, fmt.Errorf("ra: %s has no IPv6 link-local address", r.ifi.Name)
}
