package appliance

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"castiron/pxe/netboot"
)

// provisioningSite is where the provisioning network is and how booting
// machines reach castiron: worked out from the flags before anything is
// built, since both the conductor and the boot servers need the public URL.
// The interface may have IPv4, IPv6 or both; each family castiron serves
// has its own server address and URLs.
type provisioningSite struct {
	iface *net.Interface // nil without --pxe-interface
	// serverIP/subnet: the interface's IPv4 address (invalid: none).
	serverIP netip.Addr
	subnet   *net.IPNet
	// serverIP6/prefix6: its global (or ULA) IPv6 address (invalid: none).
	serverIP6 netip.Addr
	prefix6   netip.Prefix
	// publicURL is the API as nodes reach it (the conductor's image URLs
	// start with it): --public-url, else the IPv4 address, else the IPv6
	// one, with the API port.
	publicURL string
	// urls4 and urls6 are what a node that reached castiron over IPv4 or
	// IPv6 is told (iPXE script, kernel command line).
	urls4, urls6 netboot.URLs
	// agentAddrs are extra listeners on the provisioning network for the
	// agent-facing endpoints only, one per address the API listener does
	// not cover.
	agentAddrs []string
	// bootAddrs are plain-HTTP listeners for /boot/ on the provisioning
	// addresses when the API speaks TLS (iPXE cannot check castiron's
	// certificate; the agent then talks HTTPS).
	bootAddrs []string
}

func siteOf(c *serveConfig) (provisioningSite, error) {
	site := provisioningSite{publicURL: c.pxe.publicURL}
	if c.pxe.iface == "" {
		return site, nil
	}
	ifc, err := net.InterfaceByName(c.pxe.iface)
	if err != nil {
		return site, fmt.Errorf("--pxe-interface %s: %w", c.pxe.iface, err)
	}
	site.iface = ifc
	if err := site.addresses(ifc); err != nil {
		return site, fmt.Errorf("--pxe-interface %s: %w", c.pxe.iface, err)
	}
	_, apiPort, err := net.SplitHostPort(c.listen)
	if err != nil {
		return site, fmt.Errorf("--listen %q: %w", c.listen, err)
	}
	scheme := "http"
	if tlsEnabled(c) {
		scheme = "https"
	}
	urlFor := func(scheme string, ip netip.Addr, port string) string {
		if !ip.IsValid() {
			return ""
		}
		return scheme + "://" + net.JoinHostPort(ip.String(), port)
	}
	site.urls4.API, site.urls6.API = urlFor(scheme, site.serverIP, apiPort), urlFor(scheme, site.serverIP6, apiPort)
	if site.publicURL == "" {
		site.publicURL = site.urls4.API
		if site.publicURL == "" {
			site.publicURL = site.urls6.API
		}
	} else {
		// An operator's URL (a name, a NAT'd address) is what every node
		// is told.
		site.urls4.API, site.urls6.API = site.publicURL, site.publicURL
	}
	pub, err := url.Parse(site.publicURL)
	if err != nil || pub.Host == "" {
		return site, fmt.Errorf("--public-url %q: not a URL", site.publicURL)
	}
	site.urls4.Boot, site.urls6.Boot = site.urls4.API, site.urls6.API
	if tlsEnabled(c) {
		bp := c.pxe.bootHTTPPort
		site.urls4.Boot, site.urls6.Boot = urlFor("http", site.serverIP, bp), urlFor("http", site.serverIP6, bp)
	}
	for _, ip := range []netip.Addr{site.serverIP, site.serverIP6} {
		if !ip.IsValid() {
			continue
		}
		if !listenCovers(c.listen, ip) {
			site.agentAddrs = append(site.agentAddrs, net.JoinHostPort(ip.String(), portOf(pub, apiPort)))
		}
		if tlsEnabled(c) {
			site.bootAddrs = append(site.bootAddrs, net.JoinHostPort(ip.String(), c.pxe.bootHTTPPort))
		}
	}
	return site, nil
}

// urlsFor picks the URLs for a node that reached castiron on local.
func (s provisioningSite) urlsFor(local netip.Addr) netboot.URLs {
	if local.Unmap().Is6() && s.urls6.API != "" {
		return s.urls6
	}
	if s.urls4.API != "" {
		return s.urls4
	}
	return s.urls6
}

// addresses reads the interface's IPv4 address and its first global IPv6
// address; at least one is needed.
func (s *provisioningSite) addresses(ifc *net.Interface) error {
	addrs, err := ifc.Addrs()
	if err != nil {
		return err
	}
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, _ := netip.AddrFromSlice(n.IP)
		ip = ip.Unmap()
		ones, _ := n.Mask.Size()
		switch {
		case ip.Is4() && !s.serverIP.IsValid():
			s.serverIP, s.subnet = ip, n
		case ip.Is6() && !ip.IsLinkLocalUnicast() && !ip.IsLoopback() && !s.serverIP6.IsValid():
			s.serverIP6, s.prefix6 = ip, netip.PrefixFrom(ip, ones).Masked()
		}
	}
	if !s.serverIP.IsValid() && !s.serverIP6.IsValid() {
		return fmt.Errorf("no IPv4 and no global IPv6 address on the interface")
	}
	return nil
}

// dhcpRange parses FIRST,LAST, or picks the upper half of the subnet.
func dhcpRange(spec string, server netip.Addr, n *net.IPNet) (netip.Addr, netip.Addr, error) {
	if spec != "" {
		a, b, ok := strings.Cut(spec, ",")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || !first.Is4() || !last.Is4() || last.Less(first) {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("--dhcp-range %q: want FIRST,LAST IPv4 addresses", spec)
		}
		return first, last, nil
	}
	ones, bits := n.Mask.Size()
	if bits != 32 || ones > 29 {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("--dhcp-range is required for a /%d network", ones)
	}
	base := binary.BigEndian.Uint32(n.IP.To4().Mask(n.Mask))
	size := uint32(1) << (32 - ones)
	first, last := base+size/2, base+size-2
	s := binary.BigEndian.Uint32(server.AsSlice())
	if s >= first && s <= last {
		first = s + 1 // keep our own address out of the pool
	}
	return u32Addr(first), u32Addr(last), nil
}

// dhcp6Range parses FIRST,LAST (IPv6, one /64), or picks ::1000-::1fff of
// the interface's /64, clear of the low addresses routers and servers
// usually take.
func dhcp6Range(spec string, prefix netip.Prefix) (netip.Addr, netip.Addr, error) {
	if spec != "" {
		a, b, ok := strings.Cut(spec, ",")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || !first.Is6() || !last.Is6() || first.Is4In6() || last.Is4In6() || last.Less(first) {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("--dhcp6-range %q: want FIRST,LAST IPv6 addresses", spec)
		}
		return first, last, nil
	}
	if prefix.Bits() > 64 {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("--dhcp6-range is required for a /%d prefix", prefix.Bits())
	}
	b := prefix.Masked().Addr().As16()
	b[14], b[15] = 0x10, 0
	first := netip.AddrFrom16(b)
	b[14], b[15] = 0x1f, 0xff
	return first, netip.AddrFrom16(b), nil
}

func u32Addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// listenCovers reports whether the API listener already accepts connections
// on ip. Go listens on both families for "" and "::", on IPv4 only for
// "0.0.0.0".
func listenCovers(listen string, ip netip.Addr) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	switch host {
	case "", "::":
		return true
	case "0.0.0.0":
		return ip.Unmap().Is4()
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a == ip
}

func portOf(u *url.URL, def string) string {
	if p := u.Port(); p != "" {
		return p
	}
	return def
}
