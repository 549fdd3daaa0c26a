package netup

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Applied is what Static configured.
type Applied struct {
	// Interfaces maps link ids of the network data to kernel names.
	Interfaces map[string]string
	// Addresses are the static addresses set, "eth0 10.0.0.5/24".
	Addresses []string
	// Leases are those of the networks configured by DHCP (ipv4_dhcp);
	// keep them renewed with KeepRenewed.
	Leases []*Lease
}

// Static configures the network from network_data instead of DHCP (virtual
// media boots with no DHCP server): each NIC link is found by its MAC
// (waiting up to LinkTimeout for its driver and carrier), set up with its
// MTU; VLAN links are created on theirs; static IPv4/IPv6 addresses and
// routes are set; ipv4_dhcp networks get a DHCP lease; ipv6_dhcp and
// ipv6_slaac are left to the kernel's autoconfiguration on the up link; the
// DNS servers go to ResolvConf.
func Static(ctx context.Context, cfg Config, nd *NetworkData) (*Applied, error) {
	cfg = cfg.withDefaults()
	if err := setLoopbackUp(); err != nil {
		cfg.Log.Warn("lo up failed", "err", err)
	}
	res := &Applied{Interfaces: map[string]string{}}
	links := map[string]netlink.Link{}
	for _, l := range nd.Links {
		var link netlink.Link
		var err error
		if l.Type == "vlan" {
			link, err = addVLAN(links[l.VLANLink], l)
		} else {
			mac, _ := net.ParseMAC(l.MAC)
			link, err = waitMAC(ctx, cfg, mac)
		}
		if err != nil {
			return nil, fmt.Errorf("network_data link %s: %w", l.ID, err)
		}
		if l.MTU != nil && *l.MTU >= 576 && *l.MTU != link.Attrs().MTU {
			if err := netlink.LinkSetMTU(link, *l.MTU); err != nil {
				cfg.Log.Warn("setting MTU failed", "link", l.ID, "mtu", *l.MTU, "err", err)
			}
		}
		if err := netlink.LinkSetUp(link); err != nil {
			return nil, fmt.Errorf("network_data link %s: up: %w", l.ID, err)
		}
		links[l.ID] = link
		res.Interfaces[l.ID] = link.Attrs().Name
		cfg.Log.Info("link configured", "link", l.ID, "type", l.Type, "nic", link.Attrs().Name, "mac", link.Attrs().HardwareAddr.String())
	}
	for _, n := range nd.Networks {
		link := links[n.Link]
		name := link.Attrs().Name
		switch n.Type {
		case "ipv4", "ipv6":
			addr, err := n.Address()
			if err != nil {
				return nil, err
			}
			a := &netlink.Addr{IPNet: addr}
			if n.Type == "ipv6" {
				a.Flags = unix.IFA_F_NODAD // usable at once: the ramdisk talks to castiron right away
			}
			if err := netlink.AddrReplace(link, a); err != nil {
				return nil, fmt.Errorf("network_data network %s: adding %s to %s: %w", n.ID, addr, name, err)
			}
			res.Addresses = append(res.Addresses, name+" "+addr.String())
			for _, r := range n.Routes {
				dst, gw, _ := r.parse()
				route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: gw, Family: family(gw)}
				if ones, _ := dst.Mask.Size(); ones > 0 {
					route.Dst = dst
				}
				if err := netlink.RouteReplace(route); err != nil {
					return nil, fmt.Errorf("network_data network %s: route to %s via %s: %w", n.ID, dst, gw, err)
				}
			}
			cfg.Log.Info("address configured", "network", n.ID, "nic", name, "addr", addr.String(), "routes", len(n.Routes))
		case "ipv4_dhcp", "dhcp4":
			raw, err := request(ctx, cfg, name, link.Attrs().HardwareAddr)
			if err != nil {
				return nil, fmt.Errorf("network_data network %s: DHCP on %s: %w", n.ID, name, err)
			}
			lease := newLease(name, link.Attrs().HardwareAddr, raw)
			if err := apply(cfg, lease, nil); err != nil {
				return nil, err
			}
			res.Leases = append(res.Leases, lease)
			res.Addresses = append(res.Addresses, name+" "+lease.Address.String()+" (dhcp)")
		default:
			cfg.Log.Info("network left to the kernel's autoconfiguration", "network", n.ID, "type", n.Type, "nic", name)
		}
	}
	if cfg.ResolvConf != "" {
		if dns := nd.DNSServers(); len(dns) > 0 {
			if err := writeResolvConf(cfg.ResolvConf, &Lease{DNS: dns}); err != nil {
				cfg.Log.Warn("writing resolv.conf failed", "err", err)
			}
		}
	}
	return res, nil
}

func family(ip net.IP) int {
	if ip.To4() != nil {
		return netlink.FAMILY_V4
	}
	return netlink.FAMILY_V6
}

// waitMAC waits for the NIC with mac, setting it up as soon as it appears,
// until it has carrier or LinkTimeout passed (then it is used as it is).
func waitMAC(ctx context.Context, cfg Config, mac net.HardwareAddr) (netlink.Link, error) {
	start := time.Now()
	upped := false
	for {
		links, err := netlink.LinkList()
		if err != nil {
			return nil, fmt.Errorf("listing links: %w", err)
		}
		var found netlink.Link
		for _, l := range links {
			if candidate(l) && bytes.Equal(l.Attrs().HardwareAddr, mac) {
				found = l
				break
			}
		}
		over := time.Since(start) >= cfg.LinkTimeout
		if found != nil && !upped {
			if err := netlink.LinkSetUp(found); err != nil {
				cfg.Log.Warn("link up failed", "nic", found.Attrs().Name, "err", err)
			}
			upped = true
		}
		switch {
		case found != nil && (hasCarrier(found) || over):
			if !hasCarrier(found) {
				cfg.Log.Warn("NIC has no carrier, configuring it anyway", "nic", found.Attrs().Name)
			}
			return found, nil
		case over:
			return nil, &ErrNoLink{MAC: mac, Waited: time.Since(start), Summary: summary(links)}
		}
		if err := sleep(ctx, linkPoll); err != nil {
			return nil, err
		}
	}
}

// addVLAN creates (or finds) the VLAN interface of l on parent.
func addVLAN(parent netlink.Link, l Link) (netlink.Link, error) {
	name := fmt.Sprintf("%s.%d", parent.Attrs().Name, l.VLANID)
	if len(name) > unix.IFNAMSIZ-1 {
		name = fmt.Sprintf("vlan%d", l.VLANID)
	}
	if existing, err := netlink.LinkByName(name); err == nil {
		return existing, nil
	}
	attrs := netlink.NewLinkAttrs()
	attrs.Name, attrs.ParentIndex = name, parent.Attrs().Index
	if l.VLANMAC != "" {
		mac, err := net.ParseMAC(l.VLANMAC)
		if err != nil {
			return nil, fmt.Errorf("vlan_mac_address %q: %w", l.VLANMAC, err)
		}
		attrs.HardwareAddr = mac
	}
	if err := netlink.LinkAdd(&netlink.Vlan{LinkAttrs: attrs, VlanId: l.VLANID}); err != nil {
		return nil, fmt.Errorf("adding VLAN %d on %s: %w", l.VLANID, parent.Attrs().Name, err)
	}
	return netlink.LinkByName(name)
}

// ReadNetworkData reads and parses the file at path; (nil, nil) when it
// does not exist.
func ReadNetworkData(path string) (*NetworkData, error) {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if len(strings.TrimSpace(string(b))) == 0 {
		return nil, nil
	}
	return ParseNetworkData(b)
}
