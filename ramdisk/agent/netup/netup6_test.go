package netup

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// agentMain6 is the child's IPv6 run: Up6 towards server, then a renewal.
func agentMain6(ctx context.Context, cfg Config, server string) int {
	var res agentResult
	cfg.Server = netip.MustParseAddr(server)
	lease, err := Up6(ctx, cfg)
	if err == nil {
		res.Interface, res.Address = lease.Interface, lease.Address.String()
		var renewed *Lease6
		if renewed, err = request6(ctx, cfg.withDefaults(), lease.Interface, lease.MAC, lease.iaid, lease.Address); err == nil {
			res.Renewed = renewed.Address.String()
		}
	}
	if err != nil {
		res.Error = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// TestDHCPv6: the agent side of an IPv6-only provisioning network, against
// dnsmasq sending router advertisements (M flag, on-link prefix) and
// answering DHCPv6: Up6 configures the leased address, the server's prefix
// is reachable, a renewal keeps the address; dnsmasq saw the vendor class
// and read the MAC from the DUID.
func TestDHCPv6(t *testing.T) {
	requireNetns(t, "ip", "dnsmasq")
	l := newLab6(t)
	res := l.agent(t, "NETUP_TEST_MAC="+l.agtMAC, "NETUP_TEST_SERVER6="+l.server6)
	a, err := netip.ParseAddr(res.Address)
	if err != nil || !netip.MustParsePrefix(l.server6+"/64").Contains(a) || a.As16()[14] != 0x01 {
		t.Fatalf("address %q not from dnsmasq's range", res.Address)
	}
	if res.Renewed != res.Address {
		t.Errorf("renewed %q, want %q", res.Renewed, res.Address)
	}
	ns, err := netns.GetFromName(l.agtNS)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	link, err := h.LinkByName(l.agtIf)
	if err != nil {
		t.Fatal(err)
	}
	addrs, _ := h.AddrList(link, netlink.FAMILY_V6)
	found := false
	for _, ad := range addrs {
		if ad.IP.String() == res.Address {
			found = true
		}
	}
	if !found {
		t.Errorf("%s not on %s: %v", res.Address, l.agtIf, addrs)
	}
	if rs, err := h.RouteGet(netip.MustParseAddr(l.server6).AsSlice()); err != nil || len(rs) == 0 {
		t.Errorf("no route to the server %s: %v", l.server6, err)
	}
	// dnsmasq logs only the vendor class's enterprise number (castiron's
	// DHCPv6 server reads the string: pxe/dhcp TestServer6Stages).
	if !strings.Contains(l.log(), "vendor class: 0") || !strings.Contains(l.log(), "DHCPREPLY(vs"+l.agtIf[2:]+") "+res.Address+" 00:03:00:01:"+l.agtMAC) {
		t.Errorf("dnsmasq did not see the vendor class and the DUID-LL:\n%s", l.log())
	}
}

// newLab6 is newLab for IPv6: the server end has fd51:203:<net>::1/64 and
// dnsmasq sends RAs and leases ::100-::1ff.
func newLab6(t *testing.T) *lab {
	suffix := randomHex(3)
	l := &lab{
		srvNS:      "castiron-dhcp6s-" + suffix,
		agtNS:      "castiron-dhcp6a-" + suffix,
		agtIf:      "va" + suffix,
		agtMAC:     "02:cb:" + strings.Join([]string{suffix[0:2], suffix[2:4], suffix[4:6]}, ":") + ":06",
		dnsmasqLog: filepath.Join(t.TempDir(), "dnsmasq.log"),
	}
	prefix := fmt.Sprintf("fd51:203:%s::", suffix[:4])
	l.server6 = prefix + "1"
	srvIf := "vs" + suffix
	run(t, "ip", "netns", "add", l.srvNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.srvNS).Run() })
	run(t, "ip", "netns", "add", l.agtNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.agtNS).Run() })
	run(t, "ip", "-n", l.srvNS, "link", "add", srvIf, "type", "veth", "peer", "name", l.agtIf, "netns", l.agtNS)
	run(t, "ip", "-n", l.agtNS, "link", "set", l.agtIf, "address", l.agtMAC)
	run(t, "ip", "-n", l.srvNS, "addr", "add", l.server6+"/64", "dev", srvIf, "nodad")
	run(t, "ip", "-n", l.srvNS, "link", "set", srvIf, "up")
	dir := t.TempDir()
	cmd := exec.Command("ip", "netns", "exec", l.srvNS, "dnsmasq",
		"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--no-resolv", "--no-hosts",
		"--user=root", "--group=root", "--pid-file="+filepath.Join(dir, "dnsmasq.pid"),
		"--bind-interfaces", "--interface="+srvIf, "--enable-ra",
		"--dhcp-range="+prefix+"100,"+prefix+"1ff,64,2m",
		"--dhcp-leasefile="+filepath.Join(dir, "leases"), "--log-dhcp", "--log-facility="+l.dnsmasqLog)
	if err := cmd.Start(); err != nil {
		t.Fatalf("dnsmasq: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dnsmasq log:\n%s", l.log())
		}
	})
	time.Sleep(200 * time.Millisecond) // dnsmasq binds
	return l
}
