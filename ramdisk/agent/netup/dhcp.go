package netup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"github.com/vishvananda/netlink"
)

// dhcpTimeout is how long one DHCP exchange waits for each answer.
const dhcpTimeout = 3 * time.Second

// modifiers identify the agent to the DHCP server: vendor class (option 60)
// and client identifier 01+MAC (option 61, as iPXE sends, so castiron keys
// the lease the same way across boot stages).
func modifiers(cfg Config, mac net.HardwareAddr) []dhcpv4.Modifier {
	return []dhcpv4.Modifier{
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(cfg.VendorClass)),
		dhcpv4.WithOption(dhcpv4.OptClientIdentifier(append([]byte{1}, mac...))),
		dhcpv4.WithRequestedOptions(
			dhcpv4.OptionSubnetMask, dhcpv4.OptionRouter, dhcpv4.OptionDomainNameServer,
			dhcpv4.OptionHostName, dhcpv4.OptionDomainName, dhcpv4.OptionBroadcastAddress,
			dhcpv4.OptionInterfaceMTU,
		),
	}
}

// request runs one DISCOVER/OFFER/REQUEST/ACK exchange on a raw socket. The
// socket is closed afterwards: a packet socket sees every IPv4 packet of the
// NIC, which would tax a multi-GB image download.
func request(ctx context.Context, cfg Config, ifname string, mac net.HardwareAddr) (*nclient4.Lease, error) {
	client, err := nclient4.New(ifname, nclient4.WithTimeout(dhcpTimeout), nclient4.WithRetry(2))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	return client.Request(ctx, modifiers(cfg, mac)...)
}

func newLease(ifname string, mac net.HardwareAddr, raw *nclient4.Lease) *Lease {
	ack := raw.ACK
	l := &Lease{
		Interface: ifname,
		MAC:       mac,
		Address:   net.IPNet{IP: ack.YourIPAddr.To4(), Mask: ack.SubnetMask()},
		DNS:       ack.DNS(),
		Server:    ack.ServerIdentifier(),
		Hostname:  ack.HostName(),
		Domain:    ack.DomainName(),
		Duration:  ack.IPAddressLeaseTime(0),
		Acquired:  raw.CreationTime,
		raw:       raw,
	}
	if l.Address.Mask == nil {
		l.Address.Mask = l.Address.IP.DefaultMask() // classful, as RFC 2131 clients assume
	}
	if routers := ack.Router(); len(routers) > 0 {
		l.Router = routers[0]
	}
	l.Renewal = ack.IPAddressRenewalTime(l.Duration / 2)
	return l
}

// apply configures the lease on its NIC: address (without a kernel
// lifetime: the ramdisk is short-lived and must not lose its address if a
// renewal fails), default route, MTU, resolv.conf. old, when set and
// different, is the previous lease's address, removed.
func apply(cfg Config, l *Lease, old *net.IPNet) error {
	link, err := netlink.LinkByName(l.Interface)
	if err != nil {
		return err
	}
	if old != nil && !old.IP.Equal(l.Address.IP) {
		if err := netlink.AddrDel(link, &netlink.Addr{IPNet: old}); err != nil {
			cfg.Log.Warn("removing the old address failed", "addr", old.String(), "err", err)
		}
	}
	addr := &netlink.Addr{IPNet: &l.Address, Broadcast: broadcast(l)}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("adding %s to %s: %w", l.Address.String(), l.Interface, err)
	}
	if mtu := mtu(l.raw.ACK); mtu >= 576 && mtu != link.Attrs().MTU {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			cfg.Log.Warn("setting MTU failed", "mtu", mtu, "err", err)
		}
	}
	if l.Router != nil {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: l.Router, Src: l.Address.IP}
		if err := netlink.RouteReplace(route); err != nil {
			return fmt.Errorf("default route via %s: %w", l.Router, err)
		}
	}
	if cfg.ResolvConf != "" && len(l.DNS) > 0 {
		if err := writeResolvConf(cfg.ResolvConf, l); err != nil {
			cfg.Log.Warn("writing resolv.conf failed", "err", err)
		}
	}
	return nil
}

func broadcast(l *Lease) net.IP {
	if b := l.raw.ACK.BroadcastAddress(); b != nil {
		return b
	}
	ip, mask := l.Address.IP.To4(), l.Address.Mask
	if len(mask) == 16 {
		mask = mask[12:]
	}
	b := make(net.IP, 4)
	for i := range b {
		b[i] = ip[i] | ^mask[i]
	}
	return b
}

func mtu(ack *dhcpv4.DHCPv4) int {
	v := ack.GetOneOption(dhcpv4.OptionInterfaceMTU)
	if len(v) != 2 {
		return 0
	}
	return int(v[0])<<8 | int(v[1])
}

func writeResolvConf(path string, l *Lease) error {
	var b strings.Builder
	if l.Domain != "" {
		fmt.Fprintf(&b, "search %s\n", l.Domain)
	}
	for _, ns := range l.DNS {
		fmt.Fprintf(&b, "nameserver %s\n", ns)
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// Renew extends the lease (RFC 2131 RENEWING: a REQUEST with ciaddr set)
// and re-applies it. A NAK means the address is gone: a new lease is
// requested and the old address replaced.
func Renew(ctx context.Context, cfg Config, l *Lease) (*Lease, error) {
	cfg = cfg.withDefaults()
	client, err := nclient4.New(l.Interface, nclient4.WithTimeout(dhcpTimeout), nclient4.WithRetry(2))
	if err != nil {
		return nil, err
	}
	raw, err := client.Renew(ctx, l.raw, modifiers(cfg, l.MAC)...)
	client.Close()
	var nak *nclient4.ErrNak
	if errors.As(err, &nak) {
		cfg.Log.Warn("lease renewal refused, requesting a new one", "addr", l.Address.String())
		raw, err = request(ctx, cfg, l.Interface, l.MAC)
	}
	if err != nil {
		return nil, err
	}
	renewed := newLease(l.Interface, l.MAC, raw)
	if err := apply(cfg, renewed, &l.Address); err != nil {
		return nil, err
	}
	return renewed, nil
}

// KeepRenewed renews the lease at T1 until ctx ends; run it in a goroutine
// the caller waits for. A failed renewal is retried after half the time
// left (at least 10 s); the address stays configured meanwhile.
func KeepRenewed(ctx context.Context, cfg Config, l *Lease) {
	cfg = cfg.withDefaults()
	if l.Duration <= 0 || l.Duration == time.Duration(0xffffffff)*time.Second {
		return // infinite lease
	}
	next := l.Renewal
	for {
		if err := sleep(ctx, time.Until(l.Acquired.Add(next))); err != nil {
			return
		}
		renewed, err := Renew(ctx, cfg, l)
		if err == nil {
			cfg.Log.Debug("lease renewed", "addr", renewed.Address.String(), "lease", renewed.Duration)
			l, next = renewed, renewed.Renewal
			continue
		}
		if ctx.Err() != nil {
			return
		}
		left := time.Until(l.Acquired.Add(l.Duration))
		wait := max(left/2, 10*time.Second)
		cfg.Log.Warn("lease renewal failed", "err", err, "retry_in", wait.Round(time.Second))
		next = time.Since(l.Acquired) + wait
	}
}
