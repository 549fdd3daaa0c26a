// Package bmc reads and configures the machine's own BMC in-band, through
// the host's system interface (KCS/SSIF at /dev/ipmi0, the kernel's
// ipmi_si/ipmi_ssif and ipmi_devintf): the BMC's LAN address and MAC as
// ironic-python-agent reports them (bmc_address, bmc_v6address, bmc_mac),
// and, on request, an IPMI user for castiron (as MAAS enlistment does).
package bmc

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Conn is the part of an IPMI system-interface client the package uses.
// OpenDevice gives the real one; tests play a BMC.
type Conn interface {
	// ChannelMedium is Get Channel Info's medium type of a channel.
	ChannelMedium(ctx context.Context, channel uint8) (uint8, error)
	// LanParam is Get LAN Configuration Parameters' data (without the
	// revision byte).
	LanParam(ctx context.Context, channel, param, set uint8) ([]byte, error)
	Users
}

// mediumLAN is the 802.3 LAN channel medium type.
const mediumLAN = 0x04

// LAN configuration parameter numbers (IPMI 2.0, table 23-4).
const (
	paramIP          = 3
	paramMAC         = 5
	paramIPv6Enables = 51
	paramIPv6Status  = 55
	paramIPv6Static  = 56
	paramIPv6Dynamic = 59
)

// Info is what the agent reports of the BMC, in ironic-python-agent's
// terms: nil when the machine has no IPMI device; "0.0.0.0" / "::/0" when
// it has one but no channel has an address; MAC nil when no channel has a
// usable one.
type Info struct {
	Address   *string
	V6Address *string
	MAC       *string
	// Channel is the first LAN channel (0 when none), where a user is
	// given LAN access.
	Channel uint8
}

// lanChannels are the LAN channels among 1-11 (the channels that can be
// assigned to a medium), in order.
func lanChannels(ctx context.Context, c Conn) []uint8 {
	var out []uint8
	for ch := uint8(1); ch <= 11; ch++ {
		if m, err := c.ChannelMedium(ctx, ch); err == nil && m&0x7f == mediumLAN {
			out = append(out, ch)
		}
	}
	return out
}

// Read collects the BMC's addresses as ironic-python-agent's
// get_bmc_address, get_bmc_v6address and get_bmc_mac do.
func Read(ctx context.Context, c Conn) Info {
	chans := lanChannels(ctx, c)
	info := Info{}
	if len(chans) > 0 {
		info.Channel = chans[0]
	}
	v4 := "0.0.0.0"
	for _, ch := range chans {
		if ip := ipv4(ctx, c, ch); ip != "" && ip != "0.0.0.0" {
			v4 = ip
			break
		}
	}
	info.Address = &v4
	v6 := "::/0"
	for _, ch := range chans {
		if a := ipv6(ctx, c, ch); a != "" {
			v6 = a
			break
		}
	}
	info.V6Address = &v6
	for _, ch := range chans {
		ip := ipv4(ctx, c, ch)
		if ip == "" {
			continue
		}
		if a := ipv6(ctx, c, ch); ip == "0.0.0.0" && (a == "" || strings.HasPrefix(a, "fe80")) {
			continue // no address of either kind on this channel
		}
		b, err := c.LanParam(ctx, ch, paramMAC, 0)
		if err != nil || len(b) < 6 {
			continue
		}
		mac := net.HardwareAddr(b[:6]).String()
		if mac != "00:00:00:00:00:00" {
			info.MAC = &mac
			break
		}
	}
	return info
}

// ipv4 is the channel's IP address, "" when it cannot be read.
func ipv4(ctx context.Context, c Conn, ch uint8) string {
	b, err := c.LanParam(ctx, ch, paramIP, 0)
	if err != nil || len(b) < 4 {
		return ""
	}
	return netip.AddrFrom4([4]byte(b[:4])).String()
}

// ipv6 is the channel's active IPv6 address (dynamic from DHCPv6 or SLAAC
// first, then an enabled static one), "" when there is none or IPv6 is off.
func ipv6(ctx context.Context, c Conn, ch uint8) string {
	en, err := c.LanParam(ctx, ch, paramIPv6Enables, 0)
	if err != nil || len(en) < 1 || en[0] == 0 { // 0: IPv4 only; 1: IPv6 only; 2: both
		return ""
	}
	status, err := c.LanParam(ctx, ch, paramIPv6Status, 0)
	if err != nil || len(status) < 2 {
		return ""
	}
	static, dynamic := status[0], status[1]
	for set := uint8(0); set < dynamic; set++ {
		if a := v6Entry(ctx, c, ch, paramIPv6Dynamic, set, func(src byte) bool { t := src & 0x0f; return t == 1 || t == 2 }); a != "" {
			return a
		}
	}
	for set := uint8(0); set < static; set++ {
		if a := v6Entry(ctx, c, ch, paramIPv6Static, set, func(src byte) bool { return src&0x80 != 0 }); a != "" {
			return a
		}
	}
	return ""
}

// v6Entry reads one address set: [set][source/type][16 bytes address]
// [prefix length][status]; it counts when active (status 0), usable (ok)
// and not the unspecified address.
func v6Entry(ctx context.Context, c Conn, ch, param, set uint8, ok func(src byte) bool) string {
	b, err := c.LanParam(ctx, ch, param, set)
	if err != nil || len(b) < 20 {
		return ""
	}
	if !ok(b[1]) || b[19] != 0 {
		return ""
	}
	a := netip.AddrFrom16([16]byte(b[2:18]))
	if a.IsUnspecified() {
		return ""
	}
	return a.String()
}

// String is a log line of the info (addresses only; nothing secret).
func (i Info) String() string {
	s := func(p *string) string {
		if p == nil {
			return "none"
		}
		return *p
	}
	return fmt.Sprintf("address=%s v6=%s mac=%s channel=%d", s(i.Address), s(i.V6Address), s(i.MAC), i.Channel)
}
