package ra

import (
	"encoding/binary"
	"fmt"
	"net"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
)

// protoICMPv6 is the IANA protocol number icmp.ParseMessage wants.
const protoICMPv6 = 58

// optSourceLinkLayer is NDP option 1 (RFC 4861 4.6.1).
const optSourceLinkLayer = 1

// emptyRA is a Router Advertisement that configures nothing: current hop
// limit unspecified, M=0 and O=0 (no DHCPv6), router lifetime 0 (not a
// default router), reachable time and retransmit timer unspecified, no
// prefix, no MTU; only the source link-layer address, as routers send it.
// The checksum is left 0: Linux fills it in for ICMPv6 raw sockets.
func emptyRA(mac net.HardwareAddr) ([]byte, error) {
	body := make([]byte, 12, 12+8)
	if len(mac) == 6 {
		body = append(body, optSourceLinkLayer, 1) // length in units of 8 bytes
		body = append(body, mac...)
	}
	msg := icmp.Message{Type: ipv6.ICMPTypeRouterAdvertisement, Body: &icmp.RawBody{Data: body}}
	return msg.Marshal(nil)
}

// routerAdvertisement is a decoded RA (tests, diagnostics).
type routerAdvertisement struct {
	CurHopLimit     uint8
	Managed, Other  bool
	RouterLifetime  uint16 // seconds
	ReachableTime   uint32 // milliseconds
	RetransTimer    uint32 // milliseconds
	SourceLinkLayer net.HardwareAddr
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
		if typ == optSourceLinkLayer {
			ra.SourceLinkLayer = net.HardwareAddr(append([]byte(nil), opts[2:n]...))
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
