package netup

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/dhcpv6/nclient6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// linkLocalTimeout bounds the wait for the NIC's link-local address (its
// duplicate address detection takes about a second).
const linkLocalTimeout = 10 * time.Second

// routeWait is how long the agent waits for a router advertisement to make
// the server's prefix on-link before it adds the route itself.
const routeWait = 3 * time.Second

// Lease6 is an applied IPv6 configuration: a DHCPv6 address (stateful), or
// an address the kernel formed from a router advertisement (SLAAC) when no
// DHCPv6 server answered.
type Lease6 struct {
	Interface string
	MAC       net.HardwareAddr
	Address   netip.Addr
	SLAAC     bool          // from a router advertisement, not DHCPv6
	Lifetime  time.Duration // DHCPv6 valid lifetime
	Renewal   time.Duration // T1
	Acquired  time.Time
	iaid      [4]byte
}

// Up6 brings up lo and the boot NIC on IPv6: it waits for the link-local
// address, gets an address by DHCPv6 (rapid commit, else Solicit/Request;
// DUID-LL of the NIC's MAC, vendor class castiron-agent) and applies it,
// retrying with backoff. When DHCPv6 stays silent but the kernel formed a
// global address from a router advertisement (SLAAC), that one is used.
// cfg.Server, when set, must end up reachable: if no router advertisement
// makes its /64 on-link, the agent adds that route itself.
func Up6(ctx context.Context, cfg Config) (*Lease6, error) {
	cfg = cfg.withDefaults()
	if err := setLoopbackUp(); err != nil {
		cfg.Log.Warn("lo up failed", "err", err)
	}
	link, err := waitLink(ctx, cfg)
	if err != nil {
		return nil, err
	}
	name, mac := link.Attrs().Name, link.Attrs().HardwareAddr
	enableIPv6(cfg, name)
	if err := waitLinkLocal(ctx, link); err != nil {
		return nil, err
	}
	cfg.Log.Info("DHCPv6", "nic", name, "mac", mac.String())
	var iaid [4]byte
	copy(iaid[:], mac[2:])
	for attempt := 0; ; attempt++ {
		l, err := request6(ctx, cfg, name, mac, iaid, netip.Addr{})
		if err == nil {
			if err := apply6(ctx, cfg, link, l); err != nil {
				return nil, err
			}
			cfg.Log.Info("address configured", "nic", name, "addr", l.Address.String(), "lease", l.Lifetime)
			return l, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if a, ok := slaacAddress(link); ok && attempt >= 1 {
			cfg.Log.Info("no DHCPv6 answer; using the address formed from the router advertisement", "nic", name, "addr", a.String())
			l := &Lease6{Interface: name, MAC: mac, Address: a, SLAAC: true, Acquired: time.Now()}
			return l, ensureRoute(ctx, cfg, link)
		}
		d := backoff(attempt)
		cfg.Log.Warn("DHCPv6 failed, retrying", "nic", name, "err", err, "in", d.Round(time.Millisecond))
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// KeepRenewed6 asks for the same address again at T1 until ctx ends (a
// Solicit with rapid commit naming it: castiron keys leases on the MAC and
// answers it with the same address). SLAAC addresses are the kernel's.
func KeepRenewed6(ctx context.Context, cfg Config, l *Lease6) {
	cfg = cfg.withDefaults()
	if l.SLAAC || l.Lifetime <= 0 || l.Lifetime == time.Duration(0xffffffff)*time.Second {
		return
	}
	next := l.Renewal
	for {
		if err := sleep(ctx, time.Until(l.Acquired.Add(next))); err != nil {
			return
		}
		renewed, err := request6(ctx, cfg, l.Interface, l.MAC, l.iaid, l.Address)
		if err == nil {
			if link, lerr := netlink.LinkByName(l.Interface); lerr == nil && renewed.Address != l.Address {
				err = apply6(ctx, cfg, link, renewed)
			}
		}
		if err == nil {
			cfg.Log.Debug("DHCPv6 lease renewed", "addr", renewed.Address.String(), "lease", renewed.Lifetime)
			l, next = renewed, renewed.Renewal
			continue
		}
		if ctx.Err() != nil {
			return
		}
		wait := max(time.Until(l.Acquired.Add(l.Lifetime))/2, 10*time.Second)
		cfg.Log.Warn("DHCPv6 renewal failed", "err", err, "retry_in", wait.Round(time.Second))
		next = time.Since(l.Acquired) + wait
	}
}

// request6 runs one exchange and returns the granted address.
func request6(ctx context.Context, cfg Config, ifname string, mac net.HardwareAddr, iaid [4]byte, want netip.Addr) (*Lease6, error) {
	client, err := nclient6.New(ifname, nclient6.WithTimeout(dhcpTimeout), nclient6.WithRetry(2))
	if err != nil {
		return nil, err
	}
	defer client.Close()
	mods := []dhcpv6.Modifier{
		// DUID-LL: the MAC without nclient6's DUID-LLT timestamp, so every
		// exchange of this boot (and the next) names the same client.
		dhcpv6.WithClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: mac}),
		dhcpv6.WithIAID(iaid),
		dhcpv6.WithOption(&dhcpv6.OptVendorClass{EnterpriseNumber: 0, Data: [][]byte{[]byte(cfg.VendorClass)}}),
	}
	if want.IsValid() {
		mods = append(mods, dhcpv6.WithIANA(dhcpv6.OptIAAddress{IPv6Addr: want.AsSlice()}))
	}
	start := time.Now()
	reply, err := client.RapidSolicit(ctx, mods...)
	if err != nil {
		return nil, err
	}
	if st := reply.Options.Status(); st != nil && st.StatusCode != 0 {
		return nil, fmt.Errorf("DHCPv6: %s: %s", st.StatusCode, st.StatusMessage)
	}
	ia := reply.Options.OneIANA()
	if ia == nil {
		return nil, errors.New("DHCPv6 reply without an address (IA_NA)")
	}
	if st := ia.Options.Status(); st != nil && st.StatusCode != 0 {
		return nil, fmt.Errorf("DHCPv6: %s: %s", st.StatusCode, st.StatusMessage)
	}
	for _, a := range ia.Options.Addresses() {
		ip, ok := netip.AddrFromSlice(a.IPv6Addr)
		if !ok || a.ValidLifetime == 0 {
			continue // an address we lose comes with lifetime 0
		}
		t1 := ia.T1
		if t1 <= 0 {
			t1 = a.PreferredLifetime / 2
		}
		return &Lease6{Interface: ifname, MAC: mac, Address: ip.Unmap(), Lifetime: a.ValidLifetime, Renewal: t1,
			Acquired: start, iaid: iaid}, nil
	}
	return nil, errors.New("DHCPv6 reply without a usable address")
}

// apply6 configures the address (/128 as DHCPv6 hands it out, no duplicate
// address detection: the server just leased it to us, and DAD would hold
// it back a second) and makes sure the server is reachable.
func apply6(ctx context.Context, cfg Config, link netlink.Link, l *Lease6) error {
	addr := &netlink.Addr{IPNet: &net.IPNet{IP: l.Address.AsSlice(), Mask: net.CIDRMask(128, 128)}, Flags: unix.IFA_F_NODAD}
	if err := netlink.AddrReplace(link, addr); err != nil {
		return fmt.Errorf("adding %s to %s: %w", l.Address, l.Interface, err)
	}
	return ensureRoute(ctx, cfg, link)
}

// ensureRoute waits for a route to cfg.Server (the router advertisement's
// on-link prefix) and adds the server's /64 on-link when none comes.
func ensureRoute(ctx context.Context, cfg Config, link netlink.Link) error {
	if !cfg.Server.Is6() {
		return nil
	}
	deadline := time.Now().Add(routeWait)
	for {
		if rs, err := netlink.RouteGet(cfg.Server.AsSlice()); err == nil && len(rs) > 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		if err := sleep(ctx, linkPoll); err != nil {
			return err
		}
	}
	p, _ := cfg.Server.Prefix(64)
	route := &netlink.Route{LinkIndex: link.Attrs().Index, Dst: &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(64, 128)}}
	cfg.Log.Info("no router advertisement made the server on-link; adding the route", "route", p.String())
	if err := netlink.RouteReplace(route); err != nil {
		return fmt.Errorf("route to %s: %w", p, err)
	}
	return nil
}

// enableIPv6 turns IPv6 on for the NIC and has it accept router
// advertisements (on-link prefixes, SLAAC), as a host does by default.
func enableIPv6(cfg Config, ifname string) {
	for key, v := range map[string]string{"disable_ipv6": "0", "accept_ra": "1"} {
		path := "/proc/sys/net/ipv6/conf/" + ifname + "/" + key
		if err := writeSysctl(path, v); err != nil {
			cfg.Log.Debug("sysctl", "path", path, "err", err)
		}
	}
}

// waitLinkLocal waits until the NIC's link-local address is usable (not
// tentative): the DHCPv6 client sends from it.
func waitLinkLocal(ctx context.Context, link netlink.Link) error {
	deadline := time.Now().Add(linkLocalTimeout)
	for {
		addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
		if err == nil {
			for _, a := range addrs {
				if a.IP.IsLinkLocalUnicast() && a.Flags&(unix.IFA_F_TENTATIVE|unix.IFA_F_DADFAILED) == 0 {
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s has no usable IPv6 link-local address after %v", link.Attrs().Name, linkLocalTimeout)
		}
		if err := sleep(ctx, linkPoll); err != nil {
			return err
		}
	}
}

// slaacAddress is a global address the kernel formed on the link.
func slaacAddress(link netlink.Link) (netip.Addr, bool) {
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return netip.Addr{}, false
	}
	for _, a := range addrs {
		ip, _ := netip.AddrFromSlice(a.IP)
		if ip.IsGlobalUnicast() && !ip.IsLinkLocalUnicast() && a.Flags&unix.IFA_F_TENTATIVE == 0 {
			return ip, true
		}
	}
	return netip.Addr{}, false
}

func writeSysctl(path, value string) error {
	return os.WriteFile(path, []byte(strings.TrimSpace(value)+"\n"), 0o644)
}
