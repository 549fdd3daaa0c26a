package netup

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The DHCP test runs the agent side as a child process (this test binary
// re-executed under `ip netns exec`), so that every thread of it, and the
// sockets nclient4 and netlink open, live in the agent's namespace.
const agentEnv = "NETUP_TEST_AGENT"

func TestMain(m *testing.M) {
	if os.Getenv(agentEnv) == "1" {
		os.Exit(agentMain())
	}
	os.Exit(m.Run())
}

// agentResult is what the child reports on stdout.
type agentResult struct {
	Interface string   `json:"interface"`
	Address   string   `json:"address"`
	Router    string   `json:"router"`
	DNS       []string `json:"dns"`
	Renewed   string   `json:"renewed"`
	Error     string   `json:"error,omitempty"`
}

func agentMain() int {
	if p := os.Getenv("NETUP_TEST_STATIC"); p != "" {
		return staticMain(p)
	}
	cfg := Config{
		LinkTimeout: 5 * time.Second,
		Log:         slog.New(slog.NewTextHandler(os.Stderr, nil)),
	}
	if s := os.Getenv("NETUP_TEST_MAC"); s != "" {
		cfg.MAC, _ = net.ParseMAC(s)
	}
	if d, err := time.ParseDuration(os.Getenv("NETUP_TEST_LINK_TIMEOUT")); err == nil {
		cfg.LinkTimeout = d
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
	defer cancel()
	var res agentResult
	if s := os.Getenv("NETUP_TEST_SERVER6"); s != "" {
		return agentMain6(ctx, cfg, s)
	}
	lease, err := Up(ctx, cfg)
	if err == nil {
		res = agentResult{Interface: lease.Interface, Address: lease.Address.String(), Router: ipString(lease.Router)}
		for _, ip := range lease.DNS {
			res.DNS = append(res.DNS, ip.String())
		}
		var renewed *Lease
		if renewed, err = Renew(ctx, cfg, lease); err == nil {
			res.Renewed = renewed.Address.String()
		}
	}
	if err != nil {
		res.Error = err.Error()
	}
	json.NewEncoder(os.Stdout).Encode(res)
	return 0
}

// requireNetns skips (or fails under CI=true) when the test cannot create
// namespaces or lacks a tool.
func requireNetns(t *testing.T, tools ...string) {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	if os.Geteuid() != 0 {
		skip("needs root for network namespaces")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			skip("needs %s: %v", tool, err)
		}
	}
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// lab is a server namespace running dnsmasq on one end of a veth and an
// agent namespace holding the other end, all in 10.203.<net>.0/24.
type lab struct {
	srvNS, agtNS string
	agtIf        string
	agtMAC       string
	net          int
	leases       string
	dnsmasqLog   string // file: dnsmasq writes it while the test reads
	server6      string // IPv6 labs: the server end's address
}

func (l *lab) log() string {
	b, _ := os.ReadFile(l.dnsmasqLog)
	return string(b)
}

func newLab(t *testing.T) *lab {
	suffix := randomHex(3)
	n, _ := rand.Int(rand.Reader, big.NewInt(250))
	l := &lab{
		srvNS:      "castiron-dhcps-" + suffix,
		agtNS:      "castiron-dhcpa-" + suffix,
		agtIf:      "va" + suffix,
		agtMAC:     "02:cb:" + strings.Join([]string{suffix[0:2], suffix[2:4], suffix[4:6]}, ":") + ":01",
		net:        int(n.Int64()) + 1,
		leases:     filepath.Join(t.TempDir(), "dnsmasq.leases"),
		dnsmasqLog: filepath.Join(t.TempDir(), "dnsmasq.log"),
	}
	srvIf := "vs" + suffix
	run(t, "ip", "netns", "add", l.srvNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.srvNS).Run() })
	run(t, "ip", "netns", "add", l.agtNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.agtNS).Run() })
	// Created inside the server namespace, the peer moved straight into the
	// agent's: the veth never exists in the root namespace.
	run(t, "ip", "-n", l.srvNS, "link", "add", srvIf, "type", "veth", "peer", "name", l.agtIf, "netns", l.agtNS)
	run(t, "ip", "-n", l.agtNS, "link", "set", l.agtIf, "address", l.agtMAC)
	run(t, "ip", "-n", l.srvNS, "addr", "add", fmt.Sprintf("10.203.%d.1/24", l.net), "dev", srvIf)
	run(t, "ip", "-n", l.srvNS, "link", "set", srvIf, "up")

	dir := t.TempDir()
	cmd := exec.Command("ip", "netns", "exec", l.srvNS, "dnsmasq",
		"--keep-in-foreground", "--conf-file=/dev/null", "--port=0", "--no-resolv", "--no-hosts",
		"--user=root", "--group=root", "--pid-file="+filepath.Join(dir, "dnsmasq.pid"),
		"--bind-interfaces", "--interface="+srvIf,
		fmt.Sprintf("--dhcp-range=10.203.%d.50,10.203.%d.99,255.255.255.0,2m", l.net, l.net),
		fmt.Sprintf("--dhcp-option=option:router,10.203.%d.1", l.net),
		fmt.Sprintf("--dhcp-option=option:dns-server,10.203.%d.1", l.net),
		"--dhcp-leasefile="+l.leases, "--no-ping", "--log-dhcp", "--log-facility="+l.dnsmasqLog)
	if err := cmd.Start(); err != nil {
		t.Fatalf("dnsmasq: %v", err)
	}
	// ip netns exec execs dnsmasq: this PID is dnsmasq's.
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("dnsmasq log:\n%s", l.log())
		}
	})
	return l
}

// agent runs Up (and one Renew) in the agent namespace.
func (l *lab) agent(t *testing.T, env ...string) agentResult {
	t.Helper()
	var res agentResult
	runAgentChild(t, l.agtNS, &res, env...)
	if res.Error != "" {
		t.Fatalf("agent: %s", res.Error)
	}
	return res
}

// runAgentChild runs this test binary as the agent side (agentMain) in
// namespace ns and decodes its JSON report into res.
func runAgentChild(t *testing.T, ns string, res any, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{agentEnv + "=1"}, env...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("agent: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(out, res); err != nil {
		t.Fatalf("agent output %q: %v\n%s", out, err, stderr.String())
	}
	t.Logf("agent log:\n%s", stderr.String())
}

func TestDHCP(t *testing.T) {
	requireNetns(t, "ip", "dnsmasq")
	l := newLab(t)
	tests := []struct {
		name string
		env  []string
	}{
		{"BOOTIF", []string{"NETUP_TEST_MAC=" + l.agtMAC}},
		{"first NIC with carrier", nil},
		{"BOOTIF absent falls back", []string{"NETUP_TEST_MAC=02:00:00:00:00:99", "NETUP_TEST_LINK_TIMEOUT=1s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			run(t, "ip", "-n", l.agtNS, "addr", "flush", "dev", l.agtIf)
			res := l.agent(t, tt.env...)
			router := fmt.Sprintf("10.203.%d.1", l.net)
			ip, ipnet, err := net.ParseCIDR(res.Address)
			if err != nil || !ipnet.Contains(net.ParseIP(router)) || ip.To4()[3] < 50 || ip.To4()[3] > 99 {
				t.Fatalf("address %q not from the range (err %v)", res.Address, err)
			}
			if res.Interface != l.agtIf || res.Router != router || len(res.DNS) != 1 || res.DNS[0] != router {
				t.Errorf("lease %+v", res)
			}
			if res.Renewed != res.Address {
				t.Errorf("renewed %q, want %q", res.Renewed, res.Address)
			}
			l.checkApplied(t, ip, net.ParseIP(router))
		})
	}
	// dnsmasq saw the vendor class and keyed the lease on client id 01+MAC.
	if !strings.Contains(l.log(), "vendor class: castiron-agent") {
		t.Errorf("dnsmasq did not log the vendor class")
	}
	// Each agent run is one DORA and one renewal: two ACKs.
	if acks := strings.Count(l.log(), "DHCPACK("); acks != 2*len(tests) {
		t.Errorf("dnsmasq sent %d ACKs, want %d", acks, 2*len(tests))
	}
	leases, _ := os.ReadFile(l.leases)
	if !strings.Contains(string(leases), "01:"+l.agtMAC) {
		t.Errorf("lease file lacks client id 01:%s:\n%s", l.agtMAC, leases)
	}
}

// checkApplied reads the agent namespace with netlink: the address is on
// the NIC and the default route goes via the router.
func (l *lab) checkApplied(t *testing.T, ip, router net.IP) {
	t.Helper()
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
	if link.Attrs().OperState != netlink.OperUp && link.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("link %s not up", l.agtIf)
	}
	addrs, err := h.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, a := range addrs {
		if a.IP.Equal(ip) {
			found = true
			if ones, _ := a.Mask.Size(); ones != 24 {
				t.Errorf("address %s has /%d", a.IPNet, ones)
			}
		}
	}
	if !found {
		t.Errorf("address %s not on %s: %v", ip, l.agtIf, addrs)
	}
	routes, err := h.RouteList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range routes {
		if (r.Dst == nil || r.Dst.IP.IsUnspecified()) && r.Gw.Equal(router) {
			return
		}
	}
	t.Errorf("no default route via %s: %v", router, routes)
}
