package dhcp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"golang.org/x/sys/unix"

	"castiron/pxe/boot"
	"castiron/storage"
)

// needRoot skips a test that needs root and tools, except under CI=true,
// where a missing prerequisite is a failure.
func needRoot(t *testing.T, tools ...string) {
	t.Helper()
	var missing []string
	if os.Geteuid() != 0 {
		missing = append(missing, "root")
	}
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) == 0 {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("missing %v (required under CI=true)", missing)
	}
	t.Skipf("needs %v", missing)
}

func sh(t testing.TB, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%v: %v\n%s", args, err, out)
	}
}

// lab is two network namespaces joined by a veth pair:
// server side 10.201.50.1/24, client side (no address until a test sets one).
type lab struct {
	srvNS, cliNS string
	srvIf, cliIf string
	cliMAC       net.HardwareAddr
	dir          string
}

func newLab(t *testing.T) *lab { return newLabB(t) }

func newLabB(t testing.TB) *lab {
	t.Helper()
	b := make([]byte, 3)
	rand.Read(b)
	sfx := hex.EncodeToString(b)
	l := &lab{
		srvNS: "cidhcp-s-" + sfx, cliNS: "cidhcp-c-" + sfx,
		srvIf: "cds" + sfx, cliIf: "cdc" + sfx,
		cliMAC: mustMAC("52:54:00:c9:50:01"), dir: t.TempDir(),
	}
	sh(t, "ip", "netns", "add", l.srvNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.srvNS).Run() })
	sh(t, "ip", "netns", "add", l.cliNS)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.cliNS).Run() })
	sh(t, "ip", "link", "add", l.srvIf, "netns", l.srvNS, "type", "veth", "peer", "name", l.cliIf, "netns", l.cliNS)
	sh(t, "ip", "-n", l.srvNS, "addr", "add", "10.201.50.1/24", "dev", l.srvIf)
	sh(t, "ip", "-n", l.cliNS, "link", "set", l.cliIf, "address", l.cliMAC.String())
	for _, c := range [][]string{{l.srvNS, l.srvIf}, {l.srvNS, "lo"}, {l.cliNS, l.cliIf}, {l.cliNS, "lo"}} {
		sh(t, "ip", "-n", c[0], "link", "set", c[1], "up")
	}
	return l
}

func setns(name string) error {
	f, err := os.Open("/run/netns/" + name)
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
}

// inNetns runs fn on a thread inside namespace ns (sockets fn opens stay in
// it), then puts the thread back; if that fails the thread dies with the
// goroutine instead of returning to the scheduler in the wrong namespace.
func inNetns(ns string, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		if err := setns(ns); err != nil {
			errc <- err
			return
		}
		ferr := fn()
		if unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- ferr
	}()
	return <-errc
}

// running is a server started inside the server namespace.
type running struct {
	s      *Server
	cancel context.CancelFunc
	done   chan error
	log    *testLog
}

func (l *lab) start(t *testing.T, cfg Config, gate boot.Gate, st LeaseStore, rec boot.Recorder) *running {
	t.Helper()
	cfg.Interface = l.srvIf
	cfg.ServerIP = netip.MustParseAddr("10.201.50.1")
	r := &running{log: &testLog{}, done: make(chan error, 1)}
	r.s = newTestServer(t, cfg, gate, st, rec, r.log)
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() {
		// Never unlocked: this thread ends with the goroutine.
		runtime.LockOSThread()
		if err := setns(l.srvNS); err != nil {
			r.done <- err
			return
		}
		r.done <- r.s.Run(ctx)
	}()
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(r.log.String(), "dhcp server listening") {
		select {
		case err := <-r.done:
			t.Fatalf("server stopped: %v\n%s", err, r.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("server not listening:\n%s", r.log.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) {
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Error("Run did not return after cancel")
	}
}

// client is an nclient4 client in the client namespace, speaking with hw's
// chaddr (the server broadcasts, so any chaddr gets its replies).
func (l *lab) client(t *testing.T, hw net.HardwareAddr, timeout time.Duration) *nclient4.Client {
	t.Helper()
	var c *nclient4.Client
	err := inNetns(l.cliNS, func() (err error) {
		c, err = nclient4.New(l.cliIf, nclient4.WithHWAddr(hw), nclient4.WithTimeout(timeout), nclient4.WithRetry(2))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// dhclient runs ISC dhclient in the client namespace with a script of ours
// that appends "REASON ip=.. mask=.. routers=.. server=.. lease=.. file=.."
// lines to its log (and configures the address, as dhclient-script would).
type dhclient struct {
	cmd *exec.Cmd
	out string
}

func (l *lab) dhclient(t *testing.T) *dhclient {
	t.Helper()
	script := filepath.Join(l.dir, "dhclient-script")
	out := filepath.Join(l.dir, "dhclient.log")
	conf := filepath.Join(l.dir, "dhclient.conf")
	os.WriteFile(script, []byte(`#!/bin/sh
echo "$reason ip=$new_ip_address mask=$new_subnet_mask routers=$new_routers server=$new_dhcp_server_identifier lease=$new_dhcp_lease_time file=$new_filename" >> `+out+`
case "$reason" in
BOUND|RENEW|REBIND|REBOOT) ip addr replace "$new_ip_address/$new_subnet_mask" dev "$interface" ;;
esac
exit 0
`), 0o755)
	os.WriteFile(conf, []byte("request subnet-mask, broadcast-address, routers, domain-name-servers;\n"), 0o644)
	d := &dhclient{out: out}
	d.cmd = exec.Command("ip", "netns", "exec", l.cliNS, "dhclient", "-d", "-1", "-v", "-sf", script, "-cf", conf,
		"-lf", filepath.Join(l.dir, "dhclient.leases"), "-pf", filepath.Join(l.dir, "dhclient.pid"), l.cliIf)
	d.cmd.Stdout, d.cmd.Stderr = nil, nil
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.kill)
	return d
}

// kill ends the dhclient we started (ip netns exec execs it: same PID),
// without a RELEASE, like a machine being reset.
func (d *dhclient) kill() {
	if d.cmd.Process != nil && d.cmd.ProcessState == nil {
		d.cmd.Process.Signal(syscall.SIGKILL)
		d.cmd.Wait()
	}
}

// wait returns the first log line starting with reason after line skip.
func (d *dhclient) wait(t *testing.T, reason string, skip int, within time.Duration) (string, int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		b, _ := os.ReadFile(d.out)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		for i := skip; i < len(lines); i++ {
			for _, r := range strings.Split(reason, "|") {
				if strings.HasPrefix(lines[i], r+" ") {
					return lines[i], i + 1
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	b, _ := os.ReadFile(d.out)
	t.Fatalf("dhclient: no %s within %v; log:\n%s", reason, within, b)
	return "", 0
}

func field(line, key string) string {
	for _, f := range strings.Fields(line) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// TestNetnsFullMode runs the server in one namespace and real clients in
// another: nclient4 (as iPXE) and ISC dhclient DORA, renew, reboot, server
// restart on the same database, pool exhaustion, a refused MAC, a relayed
// request, then ProxyDHCP on the same link.
func TestNetnsFullMode(t *testing.T) {
	needRoot(t, "ip", "dhclient")
	l := newLab(t)
	ctx := context.Background()
	dbPath := filepath.Join(l.dir, "castiron.db")
	macDH, mac2, mac3, mac4, refused := l.cliMAC, mustMAC("52:54:00:c9:50:02"), mustMAC("52:54:00:c9:50:03"),
		mustMAC("52:54:00:c9:50:04"), mustMAC("52:54:00:c9:50:99")
	gate := gateFor(macDH.String(), mac2.String(), mac3.String(), mac4.String())
	cfg := Config{
		RangeStart: netip.MustParseAddr("10.201.50.100"), RangeEnd: netip.MustParseAddr("10.201.50.102"),
		Netmask: net.CIDRMask(24, 32), Router: netip.MustParseAddr("10.201.50.1"), BootFiles: BootFiles{ScriptURL: scriptURL},
		LeaseTime: 4 * time.Second, // short: dhclient renews at T1 = 2 s
	}

	// Phase 1: short leases.
	db, err := storage.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	st := &sqliteLeases{db}
	rec := &events{}
	srv := l.start(t, cfg, gate, st, rec)

	// nclient4 as iPXE: DORA, then RENEWING (ciaddr, unicast ACK).
	c2 := l.client(t, mac2, 2*time.Second)
	lease2, err := c2.Request(ctx, ipxeBIOS(mac2)...)
	if err != nil {
		t.Fatalf("nclient4 DORA: %v\n%s", err, srv.log.String())
	}
	ip2 := lease2.ACK.YourIPAddr
	if f := lease2.ACK.GetOneOption(dhcpv4.OptionBootfileName); string(f) != scriptURL(mac2, "x86_64")+"\x00" {
		t.Fatalf("iPXE boot file %q", f)
	}
	if string(lease2.ACK.GetOneOption(dhcpv4.GenericOptionCode(175))) != "\xb0\x01\x01" {
		t.Fatal("no no-pxedhcp for iPXE")
	}
	// The client now has its address (so the unicast ACK can be ARPed).
	sh(t, "ip", "-n", l.cliNS, "addr", "add", ip2.String()+"/24", "dev", l.cliIf)
	renewed, err := c2.Renew(ctx, lease2, ipxeBIOS(mac2)...)
	if err != nil || !renewed.ACK.YourIPAddr.Equal(ip2) {
		t.Fatalf("renew: %v %v", renewed, err)
	}
	sh(t, "ip", "-n", l.cliNS, "addr", "del", ip2.String()+"/24", "dev", l.cliIf)

	// ISC dhclient: BOUND, RENEW at T1 with the same address.
	dh := l.dhclient(t)
	bound, next := dh.wait(t, "BOUND", 0, 15*time.Second)
	ipDH := field(bound, "ip")
	if ipDH == "" || ipDH == ip2.String() || field(bound, "mask") != "255.255.255.0" || field(bound, "routers") != "10.201.50.1" ||
		field(bound, "server") != "10.201.50.1" || field(bound, "lease") != "4" || field(bound, "file") != "" {
		t.Fatalf("dhclient bound: %s", bound)
	}
	renew, _ := dh.wait(t, "RENEW", next, 10*time.Second)
	if field(renew, "ip") != ipDH {
		t.Fatalf("dhclient renewed %s, bound %s", renew, ipDH)
	}
	// Reset without release, start again: the address is kept, by
	// INIT-REBOOT when dhclient found its lease database, else by a full
	// DORA that the server answers with the MAC's lease (seen on a loaded
	// machine, where the killed client had not written its database).
	dh.kill()
	os.Remove(dh.out)
	dh = l.dhclient(t)
	reboot, _ := dh.wait(t, "REBOOT|BOUND", 0, 15*time.Second)
	t.Logf("dhclient: %s / %s / %s", bound, renew, reboot)
	if field(reboot, "ip") != ipDH {
		t.Fatalf("dhclient rebooted to %s, had %s", reboot, ipDH)
	}
	dh.kill()
	if k := strings.Join(rec.kinds(macDH.String()), ","); !strings.HasPrefix(k, "dhcp_discover,dhcp_offer,dhcp_request,dhcp_ack,dhcp_request,dhcp_ack") {
		t.Fatalf("dhclient timeline %s", k)
	}
	// Answers carry castiron's time for them (packet in to answer ready,
	// the lease commit included); requests carry none.
	for _, ev := range rec.all(macDH.String()) {
		answer := ev.Kind == boot.DHCPOffer || ev.Kind == boot.DHCPAck || ev.Kind == boot.DHCPNak
		if answer != (ev.Took > 0) || ev.Took > 5*time.Second {
			t.Fatalf("event %+v: took %s", ev, ev.Took)
		}
	}
	srv.stop(t)
	st.Close()

	// Phase 2: restart on the same database, hour-long leases. Expired or
	// not, each MAC gets its address back.
	cfg.LeaseTime = time.Hour
	meter := &boot.Tally{}
	cfg.Meter = meter
	st = openStore(t, dbPath)
	rec = &events{}
	srv = l.start(t, cfg, gate, st, rec)
	if !srv.s.Listening() {
		t.Error("Listening() false while serving")
	}
	for mac, want := range map[string]string{mac2.String(): ip2.String(), macDH.String(): ipDH} {
		lease, err := l.client(t, mustMAC(mac), 2*time.Second).Request(ctx, edk2PXE(mustMAC(mac))...)
		if err != nil || lease.ACK.YourIPAddr.String() != want {
			t.Fatalf("%s after restart: %v %v, want %s", mac, lease, err, want)
		}
	}
	// The third address goes to mac3; mac4 finds the pool exhausted.
	if _, err := l.client(t, mac3, 2*time.Second).Request(ctx, agent(mac3)...); err != nil {
		t.Fatal(err)
	}
	if _, err := l.client(t, mac4, 300*time.Millisecond).Request(ctx, plain(mac4)...); err == nil {
		t.Fatal("a lease from an exhausted pool")
	}
	if ev := rec.last(boot.DHCPExhausted); ev.MAC != mac4.String() || !strings.Contains(srv.log.String(), "level=ERROR") {
		t.Fatalf("exhaustion not reported: %+v\n%s", ev, srv.log.String())
	}
	// A MAC the gate refuses gets nothing.
	if _, err := l.client(t, refused, 300*time.Millisecond).Request(ctx, ipxeBIOS(refused)...); err == nil {
		t.Fatal("a lease for a refused MAC")
	}
	if k := rec.kinds(refused.String()); len(k) != 1 || k[0] != boot.DHCPIgnored {
		t.Fatalf("refused MAC timeline %v", k)
	}
	// The meter saw three DORAs, the exhausted and the refused DISCOVERs
	// unanswered; the 3-address pool is all in use.
	for key, min := range map[string]int{"dhcp discover offer": 3, "dhcp request ack": 3, "dhcp discover none": 2} {
		if n := meter.Count(key); n < min {
			t.Errorf("meter %q = %d, want >= %d", key, n, min)
		}
	}
	if inUse, free := srv.s.LeaseUsage(); inUse != 3 || free != 0 {
		t.Errorf("LeaseUsage = %d in use, %d free; want 3, 0", inUse, free)
	}

	// A relayed DISCOVER (giaddr in the subnet) is answered to giaddr:67.
	sh(t, "ip", "-n", l.cliNS, "addr", "add", "10.201.50.9/24", "dev", l.cliIf)
	var relay *net.UDPConn
	if err := inNetns(l.cliNS, func() (err error) {
		relay, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 201, 50, 9), Port: 67})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer relay.Close()
	disc := packet(t, dhcpv4.MessageTypeDiscover, mac2, edk2PXE, dhcpv4.WithGatewayIP(net.IPv4(10, 201, 50, 9)))
	offer := exchange(t, relay, disc, "10.201.50.1:67")
	if offer.MessageType() != dhcpv4.MessageTypeOffer || !offer.YourIPAddr.Equal(ip2) || !offer.GatewayIPAddr.Equal(net.IPv4(10, 201, 50, 9)) {
		t.Fatalf("relayed offer %v", offer)
	}
	srv.stop(t)

	// Phase 3: ProxyDHCP on the same link.
	rec = &events{}
	l.start(t, Config{Mode: ModeProxy, BootFiles: BootFiles{ScriptURL: scriptURL}}, gate, nil, rec)
	offer, err = l.client(t, mac2, 2*time.Second).DiscoverOffer(ctx, edk2PXE(mac2)...)
	if err != nil {
		t.Fatal(err)
	}
	if u32IP(offer.YourIPAddr) != 0 || string(offer.GetOneOption(dhcpv4.OptionBootfileName)) != "snponly.efi\x00" || offer.ClassIdentifier() != "PXEClient" {
		t.Fatalf("proxy offer: %s", offer.Summary())
	}
	if _, err := l.client(t, mac3, 300*time.Millisecond).DiscoverOffer(ctx, plain(mac3)...); err == nil {
		t.Fatal("proxy answered a non-PXE client")
	}
	// The boot-server REQUEST to 4011, from a configured client, is answered to its source.
	var pxe *net.UDPConn
	if err := inNetns(l.cliNS, func() (err error) {
		pxe, err = net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(10, 201, 50, 9), Port: 68})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer pxe.Close()
	req := packet(t, dhcpv4.MessageTypeRequest, mac2, ipxeEFI, dhcpv4.WithClientIP(net.IPv4(10, 201, 50, 9)))
	ack := exchange(t, pxe, req, "10.201.50.1:4011")
	if ack.MessageType() != dhcpv4.MessageTypeAck || u32IP(ack.YourIPAddr) != 0 ||
		string(ack.GetOneOption(dhcpv4.OptionBootfileName)) != scriptURL(mac2, "x86_64")+"\x00" {
		t.Fatalf("boot server ACK: %s", ack.Summary())
	}
}

// exchange sends req from conn to addr and returns the reply to it.
func exchange(t *testing.T, conn *net.UDPConn, req *dhcpv4.DHCPv4, addr string) *dhcpv4.DHCPv4 {
	t.Helper()
	if _, err := conn.WriteToUDPAddrPort(req.ToBytes(), netip.MustParseAddrPort(addr)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1500)
	conn.SetReadDeadline(time.Now().Add(3 * time.Second))
	for {
		n, _, err := conn.ReadFromUDPAddrPort(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("no reply from %s", addr)
		}
		if err != nil {
			t.Fatal(err)
		}
		resp, err := dhcpv4.FromBytes(buf[:n])
		if err == nil && resp.TransactionID == req.TransactionID && resp.OpCode == dhcpv4.OpcodeBootReply {
			return resp
		}
	}
}

// TestRunBindErrors: Run returns at once when it cannot listen: an unknown
// interface, or another DHCP server already on the interface (no
// SO_REUSEPORT: two lease databases must never split one link's traffic).
func TestRunBindErrors(t *testing.T) {
	cfg := proxyConfig()
	cfg.Interface = "cidhcp-none0" // does not exist: fails before any bind
	s := newTestServer(t, cfg, gateFor(), nil, nil, nil)
	errc := make(chan error, 1)
	go func() { errc <- s.Run(context.Background()) }()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "cidhcp-none0") {
			t.Fatalf("Run on a missing interface: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run on a missing interface did not return")
	}

	needRoot(t, "ip")
	l := newLab(t)
	first := l.start(t, Config{Mode: ModeProxy, BootFiles: BootFiles{ScriptURL: scriptURL}}, gateFor(), nil, nil)
	second := newTestServer(t, first.s.cfg, gateFor(), nil, nil, nil)
	err := inNetns(l.srvNS, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return second.Run(ctx)
	})
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("second server on the interface: %v", err)
	}
}
