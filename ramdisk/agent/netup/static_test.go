package netup

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestParseNetworkData(t *testing.T) {
	good := `{
	  "links": [
	    {"id": "port0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56", "mtu": 1500},
	    {"id": "vlan100", "type": "vlan", "vlan_link": "port0", "vlan_id": 100, "vlan_mac_address": "52:54:00:12:34:56"}
	  ],
	  "networks": [
	    {"id": "n4", "type": "ipv4", "link": "port0", "ip_address": "10.0.0.5", "netmask": "255.255.255.0",
	     "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.0.0.1"}],
	     "dns_nameservers": ["10.0.0.53"]},
	    {"id": "n6", "type": "ipv6", "link": "vlan100", "ip_address": "fd00:1::5/64",
	     "routes": [{"network": "::", "netmask": "::", "gateway": "fd00:1::1"}]},
	    {"id": "n6b", "type": "ipv6", "link": "port0", "ip_address": "fd00:2::5", "netmask": "ffff:ffff:ffff:ffff::"},
	    {"id": "d", "type": "ipv4_dhcp", "link": "vlan100"}
	  ],
	  "services": [{"type": "dns", "address": "10.0.0.53"}, {"type": "dns", "address": "fd00::53"}]
	}`
	nd, err := ParseNetworkData([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"10.0.0.5/24", "fd00:1::5/64", "fd00:2::5/64"} {
		a, err := nd.Networks[i].Address()
		if err != nil || a.String() != want {
			t.Errorf("network %d address %v %v, want %s", i, a, err, want)
		}
	}
	dst, gw, err := nd.Networks[0].Routes[0].parse()
	if err != nil || dst.String() != "0.0.0.0/0" || gw.String() != "10.0.0.1" {
		t.Errorf("default route %v via %v: %v", dst, gw, err)
	}
	if dns := fmt.Sprint(nd.DNSServers()); dns != "[10.0.0.53 fd00::53]" {
		t.Errorf("DNS %s", dns)
	}
	if mac := nd.BootMAC().String(); mac != "52:54:00:12:34:56" {
		t.Errorf("boot MAC %s", mac)
	}
	for name, bad := range map[string]string{
		"not json":       `{`,
		"unknown link":   `{"links": [], "networks": [{"id": "n", "type": "ipv4", "link": "x", "ip_address": "10.0.0.5"}]}`,
		"bad mac":        `{"links": [{"id": "p", "type": "phy", "ethernet_mac_address": "nope"}]}`,
		"bond":           `{"links": [{"id": "b", "type": "bond", "bond_links": []}]}`,
		"vlan id":        `{"links": [{"id": "p", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}, {"id": "v", "type": "vlan", "vlan_link": "p", "vlan_id": 5000}]}`,
		"vlan parent":    `{"links": [{"id": "v", "type": "vlan", "vlan_link": "p", "vlan_id": 5}]}`,
		"bad address":    `{"links": [{"id": "p", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [{"id": "n", "type": "ipv4", "link": "p", "ip_address": "10.0.0.500"}]}`,
		"family":         `{"links": [{"id": "p", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [{"id": "n", "type": "ipv4", "link": "p", "ip_address": "fd00::1"}]}`,
		"bad netmask":    `{"links": [{"id": "p", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [{"id": "n", "type": "ipv4", "link": "p", "ip_address": "10.0.0.1", "netmask": "255.0.255.0"}]}`,
		"route gateway":  `{"links": [{"id": "p", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [{"id": "n", "type": "ipv4", "link": "p", "ip_address": "10.0.0.1", "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "x"}]}]}`,
		"route families": `{"links": [{"id": "p", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}], "networks": [{"id": "n", "type": "ipv4", "link": "p", "ip_address": "10.0.0.1", "routes": [{"network": "::", "netmask": "::", "gateway": "10.0.0.1"}]}]}`,
	} {
		if _, err := ParseNetworkData([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// staticResult is what the child running Static reports.
type staticResult struct {
	Applied *Applied `json:"applied"`
	Error   string   `json:"error,omitempty"`
}

func staticMain(path string) int {
	var res staticResult
	nd, err := ReadNetworkData(path)
	if err == nil {
		cfg := Config{LinkTimeout: 5 * time.Second, ResolvConf: os.Getenv("NETUP_TEST_RESOLV"),
			Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res.Applied, err = Static(ctx, cfg, nd)
		cancel()
	}
	if err != nil {
		res.Error = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// TestStatic applies network data with a static IPv4 address and default
// route on the NIC, a VLAN with static IPv4 and IPv6 addresses, and DNS
// servers, inside an agent namespace; the server namespace on the other end
// of the veth then reaches every address (no DHCP anywhere).
func TestStatic(t *testing.T) {
	requireNetns(t, "ip", "ping")
	suffix := randomHex(3)
	srvNS, agtNS := "castiron-sts-"+suffix, "castiron-sta-"+suffix
	srvIf, agtIf := "vs"+suffix, "va"+suffix
	agtMAC := "02:cc:" + suffix[0:2] + ":" + suffix[2:4] + ":" + suffix[4:6] + ":01"
	for _, ns := range []string{srvNS, agtNS} {
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
	}
	run(t, "ip", "-n", srvNS, "link", "add", srvIf, "type", "veth", "peer", "name", agtIf, "netns", agtNS)
	run(t, "ip", "-n", agtNS, "link", "set", agtIf, "address", agtMAC)
	run(t, "ip", "-n", srvNS, "addr", "add", "10.204.1.1/24", "dev", srvIf)
	run(t, "ip", "-n", srvNS, "link", "set", srvIf, "up")
	// The VLAN half needs the host kernel's 8021q (some CI kernels have no
	// VLAN support at all; the ramdisk's Debian kernel has it).
	vlanIf, vlanLink := srvIf, "port0"
	if out, err := exec.Command("ip", "-n", srvNS, "link", "add", "link", srvIf, "name", srvIf+".42", "type", "vlan", "id", "42").CombinedOutput(); err != nil {
		t.Logf("no VLAN support in this kernel (%s): the VLAN's addresses go on the NIC itself", strings.TrimSpace(string(out)))
	} else {
		vlanIf, vlanLink = srvIf+".42", "vlan42"
		run(t, "ip", "-n", srvNS, "link", "set", vlanIf, "up")
	}
	run(t, "ip", "-n", srvNS, "addr", "add", "10.204.42.1/24", "dev", vlanIf)
	run(t, "ip", "-n", srvNS, "addr", "add", "fd00:cafe::1/64", "dev", vlanIf, "nodad")

	links := fmt.Sprintf(`{"id": "port0", "type": "phy", "ethernet_mac_address": %q, "mtu": 1400}`, agtMAC)
	if vlanLink == "vlan42" {
		links += `, {"id": "vlan42", "type": "vlan", "vlan_link": "port0", "vlan_id": 42}`
	}
	nd := fmt.Sprintf(`{
	  "links": [%s],
	  "networks": [
	    {"id": "n0", "type": "ipv4", "link": "port0", "ip_address": "10.204.1.7", "netmask": "255.255.255.0",
	     "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.204.1.1"}]},
	    {"id": "n1", "type": "ipv4", "link": %q, "ip_address": "10.204.42.7", "netmask": "24"},
	    {"id": "n2", "type": "ipv6", "link": %q, "ip_address": "fd00:cafe::7/64",
	     "routes": [{"network": "fd00:beef::", "netmask": "ffff:ffff:ffff:ffff::", "gateway": "fd00:cafe::1"}]}
	  ],
	  "services": [{"type": "dns", "address": "10.204.1.53"}]
	}`, links, vlanLink, vlanLink)
	dir := t.TempDir()
	path, resolv := filepath.Join(dir, "network_data.json"), filepath.Join(dir, "resolv.conf")
	if err := os.WriteFile(path, []byte(nd), 0o644); err != nil {
		t.Fatal(err)
	}
	var res staticResult
	runAgentChild(t, agtNS, &res, "NETUP_TEST_STATIC="+path, "NETUP_TEST_RESOLV="+resolv)
	if res.Error != "" {
		t.Fatalf("agent: %s", res.Error)
	}
	t.Logf("applied: %+v", res.Applied)
	if res.Applied.Interfaces["port0"] != agtIf || (vlanLink == "vlan42" && res.Applied.Interfaces["vlan42"] != agtIf+".42") {
		t.Errorf("interfaces %v", res.Applied.Interfaces)
	}
	for _, target := range []string{"10.204.1.7", "10.204.42.7", "fd00:cafe::7"} {
		if out, err := exec.Command("ip", "netns", "exec", srvNS, "ping", "-c1", "-W2", target).CombinedOutput(); err != nil {
			t.Errorf("ping %s from the server side: %v\n%s", target, err, out)
		}
	}
	routes, _ := exec.Command("ip", "-n", agtNS, "route", "show", "default").CombinedOutput()
	if !strings.Contains(string(routes), "via 10.204.1.1 dev "+agtIf) {
		t.Errorf("default route: %s", routes)
	}
	routes6, _ := exec.Command("ip", "-n", agtNS, "-6", "route", "show", "fd00:beef::/64").CombinedOutput()
	if !strings.Contains(string(routes6), "via fd00:cafe::1") {
		t.Errorf("IPv6 route: %s", routes6)
	}
	link, _ := exec.Command("ip", "-n", agtNS, "link", "show", agtIf).CombinedOutput()
	if !strings.Contains(string(link), "mtu 1400") {
		t.Errorf("MTU not applied: %s", link)
	}
	if b, _ := os.ReadFile(resolv); string(b) != "nameserver 10.204.1.53\n" {
		t.Errorf("resolv.conf %q", b)
	}
}
