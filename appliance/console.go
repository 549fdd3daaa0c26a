package appliance

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"castiron/engine/console"
)

// consolePorts parses --console-port-range "MIN:MAX" (also "MIN-MAX", as
// Ironic's port_range); "" is no range.
func consolePorts(s string) (console.Ports, error) {
	if s == "" {
		return console.Ports{}, nil
	}
	lo, hi, ok := strings.Cut(s, ":")
	if !ok {
		lo, hi, ok = strings.Cut(s, "-")
	}
	min, err1 := strconv.Atoi(strings.TrimSpace(lo))
	max, err2 := strconv.Atoi(strings.TrimSpace(hi))
	if !ok || err1 != nil || err2 != nil || min < 1 || max > 65535 || max < min {
		return console.Ports{}, fmt.Errorf("--console-port-range %q: want MIN:MAX, 1 <= MIN <= MAX <= 65535", s)
	}
	return console.Ports{Min: min, Max: max}, nil
}

// consoleAddress is the host console URLs name and the address console
// ports bind: --console-address (bound when it is an IP), else the API's
// advertised host (--public-url) bound where the API listens.
func consoleAddress(c *serveConfig, site provisioningSite) (advertise, bind string) {
	if a := c.console.address; a != "" {
		if _, err := netip.ParseAddr(a); err == nil {
			return a, a
		}
		return a, ""
	}
	listenHost, _, _ := net.SplitHostPort(c.listen)
	if ip, err := netip.ParseAddr(listenHost); err == nil && !ip.IsUnspecified() {
		bind = listenHost
	}
	if u, err := url.Parse(site.publicURL); err == nil && u.Hostname() != "" {
		return u.Hostname(), bind
	}
	if bind != "" {
		return bind, bind
	}
	return c.conductorName, ""
}
