package appliance

import (
	"net/netip"
	"testing"

	"castiron/pxe/netboot"
)

func TestListenCovers(t *testing.T) {
	v4, v6 := netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("fd51::1")
	for _, tc := range []struct {
		listen string
		ip     netip.Addr
		want   bool
	}{
		{"0.0.0.0:6385", v4, true},
		{"0.0.0.0:6385", v6, false}, // Go's tcp listener on 0.0.0.0 is IPv4 only
		{"[::]:6385", v6, true},
		{"[::]:6385", v4, true},
		{":6385", v6, true},
		{"10.0.0.1:6385", v4, true},
		{"10.0.0.1:6385", v6, false},
		{"[fd51::1]:6385", v6, true},
		{"127.0.0.1:6385", v4, false},
	} {
		if got := listenCovers(tc.listen, tc.ip); got != tc.want {
			t.Errorf("listenCovers(%s, %s) = %v", tc.listen, tc.ip, got)
		}
	}
}

func TestDHCP6Range(t *testing.T) {
	first, last, err := dhcp6Range("", netip.MustParsePrefix("fd51:0:0:7::/64"))
	if err != nil || first.String() != "fd51:0:0:7::1000" || last.String() != "fd51:0:0:7::1fff" {
		t.Fatalf("default range %s-%s %v", first, last, err)
	}
	if _, _, err := dhcp6Range("", netip.MustParsePrefix("fd51::/120")); err == nil {
		t.Error("a /120 got a default range")
	}
	if first, last, err := dhcp6Range("fd51::10, fd51::20", netip.Prefix{}); err != nil || first.String() != "fd51::10" || last.String() != "fd51::20" {
		t.Errorf("given range %s-%s %v", first, last, err)
	}
	for _, bad := range []string{"fd51::20,fd51::10", "10.0.0.1,10.0.0.2", "fd51::1", "x,y"} {
		if _, _, err := dhcp6Range(bad, netip.Prefix{}); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// TestURLsFor: a node that reached castiron over IPv6 is told IPv6 URLs;
// a single-family site tells everyone its URLs.
func TestURLsFor(t *testing.T) {
	dual := provisioningSite{urls4: netboot.URLs{API: "http://10.0.0.1:6385"}, urls6: netboot.URLs{API: "http://[fd51::1]:6385"}}
	if u := dual.urlsFor(netip.MustParseAddr("fd51::1")); u.API != "http://[fd51::1]:6385" {
		t.Errorf("IPv6 node told %s", u.API)
	}
	if u := dual.urlsFor(netip.MustParseAddr("::ffff:10.0.0.1")); u.API != "http://10.0.0.1:6385" {
		t.Errorf("IPv4 node told %s", u.API)
	}
	only6 := provisioningSite{urls6: netboot.URLs{API: "http://[fd51::1]:6385"}}
	if u := only6.urlsFor(netip.Addr{}); u.API != "http://[fd51::1]:6385" {
		t.Errorf("IPv6-only site told %s", u.API)
	}
}
