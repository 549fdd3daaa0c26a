package netup

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
)

// NetworkData is OpenStack's network_data.json (Ironic's node network_data
// field, API 1.66; the config drive's openstack/latest/network_data.json):
// links (NICs by MAC, VLANs on them), networks (addresses and routes on a
// link) and services (DNS servers). castiron puts a node's network_data in
// its virtual media ISO so its ramdisk configures itself without DHCP.
type NetworkData struct {
	Links    []Link    `json:"links"`
	Networks []Network `json:"networks"`
	Services []Service `json:"services"`
}

// Link is one entry of "links". Type "vlan" is a VLAN on VLANLink; "bond"
// is not supported; every other type ("phy", "ethernet", "vif", "ovs",
// "bridge", ...) is a NIC found by its MAC.
type Link struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	MAC      string `json:"ethernet_mac_address"`
	MTU      *int   `json:"mtu"`
	VLANLink string `json:"vlan_link"`
	VLANID   int    `json:"vlan_id"`
	VLANMAC  string `json:"vlan_mac_address"`
}

// Network is one entry of "networks": type ipv4 or ipv6 (static), ipv4_dhcp,
// ipv6_dhcp, ipv6_slaac (and their aliases "dhcp4", "dhcp6").
type Network struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Link      string    `json:"link"`
	IPAddress string    `json:"ip_address"`
	Netmask   string    `json:"netmask"`
	Routes    []Route   `json:"routes"`
	DNS       []string  `json:"dns_nameservers"`
	Services  []Service `json:"services"`
}

// Route is one route of a network; network 0.0.0.0/:: with netmask
// 0.0.0.0/:: is the default route.
type Route struct {
	Network string `json:"network"`
	Netmask string `json:"netmask"`
	Gateway string `json:"gateway"`
}

// Service is a DNS server ({"type": "dns", "address": ...}).
type Service struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// ParseNetworkData reads network_data.json and checks what the agent
// applies: every network names a known link, every address and route
// parses, links are NICs with a MAC or VLANs on a known link.
func ParseNetworkData(b []byte) (*NetworkData, error) {
	var nd NetworkData
	if err := json.Unmarshal(b, &nd); err != nil {
		return nil, fmt.Errorf("network_data: %w", err)
	}
	links := map[string]Link{}
	for i, l := range nd.Links {
		if l.ID == "" {
			return nil, fmt.Errorf("network_data: link %d has no id", i)
		}
		switch l.Type {
		case "vlan":
			if _, ok := links[l.VLANLink]; !ok {
				return nil, fmt.Errorf("network_data: vlan link %s: vlan_link %q is not a link listed before it", l.ID, l.VLANLink)
			}
			if l.VLANID < 1 || l.VLANID > 4094 {
				return nil, fmt.Errorf("network_data: vlan link %s: vlan_id %d", l.ID, l.VLANID)
			}
		case "bond":
			return nil, fmt.Errorf("network_data: link %s: bond links are not supported by castiron's agent", l.ID)
		default:
			if _, err := net.ParseMAC(l.MAC); err != nil {
				return nil, fmt.Errorf("network_data: link %s: ethernet_mac_address %q: %v", l.ID, l.MAC, err)
			}
		}
		links[l.ID] = l
	}
	for i, n := range nd.Networks {
		if _, ok := links[n.Link]; !ok {
			return nil, fmt.Errorf("network_data: network %d (%s): link %q is not listed", i, n.ID, n.Link)
		}
		if isStatic(n.Type) {
			if _, err := n.Address(); err != nil {
				return nil, err
			}
			for _, r := range n.Routes {
				if _, _, err := r.parse(); err != nil {
					return nil, fmt.Errorf("network_data: network %s: %w", n.ID, err)
				}
			}
		}
	}
	return &nd, nil
}

func isStatic(typ string) bool { return typ == "ipv4" || typ == "ipv6" }

// Address is the network's address with its prefix: ip_address may carry
// the prefix itself ("fd00::5/64"); else netmask gives it (dotted or IPv6
// form, or a bare prefix length); else a single host.
func (n Network) Address() (*net.IPNet, error) {
	if ip, ipnet, err := net.ParseCIDR(n.IPAddress); err == nil {
		ipnet.IP = ip
		return ipnet, nil
	}
	ip := net.ParseIP(n.IPAddress)
	if ip == nil {
		return nil, fmt.Errorf("network_data: network %s: ip_address %q", n.ID, n.IPAddress)
	}
	v4 := ip.To4() != nil
	if v4 != (n.Type == "ipv4") {
		return nil, fmt.Errorf("network_data: network %s: %s is not an %s address", n.ID, ip, n.Type)
	}
	if v4 {
		ip = ip.To4()
	}
	mask, err := parseMask(n.Netmask, v4)
	if err != nil {
		return nil, fmt.Errorf("network_data: network %s: %w", n.ID, err)
	}
	return &net.IPNet{IP: ip, Mask: mask}, nil
}

func parseMask(s string, v4 bool) (net.IPMask, error) {
	bits := 128
	if v4 {
		bits = 32
	}
	if s == "" {
		return net.CIDRMask(bits, bits), nil
	}
	var prefix int
	if _, err := fmt.Sscanf(s, "%d", &prefix); err == nil && !strings.ContainsAny(s, ".:") {
		if prefix < 0 || prefix > bits {
			return nil, fmt.Errorf("netmask %q", s)
		}
		return net.CIDRMask(prefix, bits), nil
	}
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("netmask %q", s)
	}
	m := net.IPMask(ip.To16())
	if v4 {
		m = net.IPMask(ip.To4())
	}
	if m == nil {
		return nil, fmt.Errorf("netmask %q", s)
	}
	if ones, total := m.Size(); total == 0 && ones == 0 {
		return nil, fmt.Errorf("netmask %q is not contiguous", s)
	}
	return m, nil
}

// parse gives the destination and gateway of a route.
func (r Route) parse() (*net.IPNet, net.IP, error) {
	gw := net.ParseIP(r.Gateway)
	if gw == nil {
		return nil, nil, fmt.Errorf("route to %s: gateway %q", r.Network, r.Gateway)
	}
	dstIP := net.ParseIP(r.Network)
	if dstIP == nil {
		return nil, nil, fmt.Errorf("route: network %q", r.Network)
	}
	v4 := dstIP.To4() != nil
	if v4 != (gw.To4() != nil) {
		return nil, nil, fmt.Errorf("route to %s via %s: address families differ", r.Network, r.Gateway)
	}
	mask, err := parseMask(r.Netmask, v4)
	if err != nil {
		return nil, nil, fmt.Errorf("route to %s: %w", r.Network, err)
	}
	if v4 {
		dstIP, gw = dstIP.To4(), gw.To4()
	}
	return &net.IPNet{IP: dstIP.Mask(mask), Mask: mask}, gw, nil
}

// DNSServers are the DNS servers of the whole document, in order, once.
func (nd *NetworkData) DNSServers() []net.IP {
	var out []net.IP
	seen := map[string]bool{}
	add := func(s string) {
		if ip := net.ParseIP(s); ip != nil && !seen[ip.String()] {
			seen[ip.String()] = true
			out = append(out, ip)
		}
	}
	for _, n := range nd.Networks {
		for _, d := range n.DNS {
			add(d)
		}
		for _, s := range n.Services {
			if s.Type == "dns" {
				add(s.Address)
			}
		}
	}
	for _, s := range nd.Services {
		if s.Type == "dns" {
			add(s.Address)
		}
	}
	return out
}

// BootMAC is the MAC of the first NIC link, the one the agent names as its
// boot interface.
func (nd *NetworkData) BootMAC() net.HardwareAddr {
	for _, l := range nd.Links {
		if l.Type != "vlan" {
			mac, _ := net.ParseMAC(l.MAC)
			return mac
		}
	}
	return nil
}
