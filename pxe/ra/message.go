package ra

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// protoICMPv6 is the IANA protocol number icmp.ParseMessage wants.
const protoICMPv6 = 58

// NDP options (RFC 4861 4.6).
const (
	optSourceLinkLayer = 1
	optPrefixInfo      = 3
)

// Prefix information flags (RFC 4861 4.6.2).
const (
	prefixOnLink     = 0x80 // L: the prefix is on this link
	prefixAutonomous = 0x40 // A: hosts may form addresses in it (SLAAC)
)

// Advert is what a Router Advertisement says. The zero value is the empty
// RA: M=0, O=0, router lifetime 0 (not a default router), no prefix, i.e.
// "nothing to configure here".
type Advert struct {
	// Managed (M) tells hosts to get addresses by DHCPv6; Other (O) to get
	// other configuration (DNS, boot file URL) by DHCPv6.
	Managed, Other bool
	// Prefixes are announced on-link (L=1), with A=1 (SLAAC) when
	// Autonomous is set. Only /64 prefixes can be used for SLAAC.
	Prefixes   []netip.Prefix
	Autonomous bool
	// ValidLifetime and PreferredLifetime of the prefixes; defaults 1 day
	// and 4 hours (radvd's).
	ValidLifetime, PreferredLifetime time.Duration
}

// configures reports whether the RA hands out anything (then it is repeated
// periodically so the prefixes do not expire on hosts).
func (a Advert) configures() bool { return a.Managed || a.Other || len(a.Prefixes) > 0 }

// marshal encodes the RA: current hop limit unspecified, router lifetime 0
// (castiron routes nothing: everything it serves is on-link), reachable
// time and retransmit timer unspecified, the source link-layer address as
// routers send it, then the prefixes. The checksum is left 0: Linux fills it
// in for ICMPv6 raw sockets.
func (a Advert) marshal(mac net.HardwareAddr) ([]byte, error) {
	body := make([]byte, 12, 12+8+32*len(a.Prefixes))
	if a.Managed {
		body[1] |= 0x80
	}
	if a.Other {
		body[1] |= 0x40
	}
	if len(mac) == 6 {
		body = append(body, optSourceLinkLayer, 1) // length in units of 8 bytes
		body = append(body, mac...)
	}
	valid, preferred := a.ValidLifetime, a.PreferredLifetime
	if valid <= 0 {
		valid = 24 * time.Hour
	}
	if preferred <= 0 || preferred > valid {
		preferred = min(4*time.Hour, valid)
	}
	for _, p := range a.Prefixes {
		if !p.Addr().Is6() || p.Addr().Is4In6() {
			return nil, fmt.Errorf("ra: prefix %s is not IPv6", p)
		}
		opt := make([]byte, 32)
		opt[0], opt[1], opt[2] = optPrefixInfo, 4, byte(p.Bits())
		opt[3] = prefixOnLink
		if a.Autonomous && p.Bits() == 64 {
			opt[3] |= prefixAutonomous
		}
		binary.BigEndian.PutUint32(opt[4:], uint32(valid/time.Second))
		binary.BigEndian.PutUint32(opt[8:], uint32(preferred/time.Second))
		addr := p.Masked().Addr().As16()
		copy(opt[16:], addr[:])
		body = append(body, opt...)
	}
	msg := icmp.Message{Type: ipv6.ICMPTypeRouterAdvertisement, Body: &icmp.RawBody{Data: body}}
	return msg.Marshal(nil)
}

// emptyRA is the RA that configures nothing (Advert's zero value).
func emptyRA(mac net.HardwareAddr) ([]byte, error) { return Advert{}.marshal(mac) }

// prefixInfo is a decoded prefix information option.
type prefixInfo struct {
	Prefix             netip.Prefix
	OnLink, Autonomous bool
	Valid, Preferred   uint32 // seconds
}

// routerAdvertisement is a decoded RA (tests, diagnostics).
type routerAdvertisement struct {
	CurHopLimit     uint8
	Managed, Other  bool
	RouterLifetime  uint16 // seconds
	ReachableTime   uint32 // milliseconds
	RetransTimer    uint32 // milliseconds
	SourceLinkLayer net.HardwareAddr
	Prefixes        []prefixInfo
	// OptionTypes lists every option in order.
	OptionTypes []uint8
}

// parseRA decodes an ICMPv6 message that must be an RA.
func parseRA(b []byte) (*routerAdvertisement, error) {
	msg, err := icmp.ParseMessage(protoICMPv6, b)
	if err != nil {
		return nil, err
	}
	if msg.Type != ipv6.ICMPTypeRouterAdvertisement || msg.Code != 0 {
		return nil, fmt.Errorf("ra: ICMPv6 type %v code %d is not a router advertisement", msg.Type, msg.Code)
	}
	raw, ok := msg.Body.(*icmp.RawBody)
	if !ok || len(raw.Data) < 12 {
		return nil, fmt.Errorf("ra: router advertisement too short")
	}
	d := raw.Data
	ra := &routerAdvertisement{
		CurHopLimit:    d[0],
		Managed:        d[1]&0x80 != 0,
		Other:          d[1]&0x40 != 0,
		RouterLifetime: binary.BigEndian.Uint16(d[2:]),
		ReachableTime:  binary.BigEndian.Uint32(d[4:]),
		RetransTimer:   binary.BigEndian.Uint32(d[8:]),
	}
	for opts := d[12:]; len(opts) > 0; {
		if len(opts) < 2 || opts[1] == 0 || int(opts[1])*8 > len(opts) {
			return nil, fmt.Errorf("ra: malformed option")
		}
		typ, n := opts[0], int(opts[1])*8
		ra.OptionTypes = append(ra.OptionTypes, typ)
		switch {
		case typ == optSourceLinkLayer:
			ra.SourceLinkLayer = net.HardwareAddr(append([]byte(nil), opts[2:n]...))
		case typ == optPrefixInfo && n == 32:
			addr := netip.AddrFrom16([16]byte(opts[16:32]))
			pfx, err := addr.Prefix(int(opts[2]))
			if err != nil {
				return nil, fmt.Errorf("ra: prefix option: %w", err)
			}
			ra.Prefixes = append(ra.Prefixes, prefixInfo{
				Prefix: pfx, OnLink: opts[3]&prefixOnLink != 0, Autonomous: opts[3]&prefixAutonomous != 0,
				Valid: binary.BigEndian.Uint32(opts[4:]), Preferred: binary.BigEndian.Uint32(opts[8:]),
			})
		}
		opts = opts[n:]
	}
	return ra, nil
}

// isRouterSolicitation checks an incoming message the way RFC 4861 6.1.1
// asks (hop limit checked by the caller): type 133, code 0, 8+ bytes.
func isRouterSolicitation(b []byte) bool {
	if len(b) < 8 {
		return false
	}
	msg, err := icmp.ParseMessage(protoICMPv6, b)
	return err == nil && msg.Type == ipv6.ICMPTypeRouterSolicitation && msg.Code == 0
}
