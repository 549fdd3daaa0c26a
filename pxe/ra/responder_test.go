package ra

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	"golang.org/x/sys/unix"
)

func TestEmptyRAEncoding(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x20, 0x20, 1}
	b, err := emptyRA(mac)
	if err != nil {
		t.Fatal(err)
	}
	want := "8600000000000000000000000000000001015254002020" + "01"
	if got := hex.EncodeToString(b); got != want {
		t.Fatalf("RA bytes %s, want %s", got, want)
	}
	ra, err := parseRA(b)
	if err != nil {
		t.Fatal(err)
	}
	if ra.RouterLifetime != 0 || ra.Managed || ra.Other || !bytes.Equal(ra.SourceLinkLayer, mac) || len(ra.OptionTypes) != 1 {
		t.Fatalf("decoded %+v", ra)
	}
}

// TestResponderOverVeth: two namespaces joined by a veth pair, the
// responder in one, a host soliciting from the other.
func TestResponderOverVeth(t *testing.T) {
	nsR, nsH := vethPair(t) // responder on "vr" in nsR, host on "vh" in nsH
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}

	// The host's socket must exist before the responder's unsolicited RA.
	host := inNetns(t, nsH, func() (*hostSide, error) { return newHostSide("vh") })
	t.Cleanup(func() { host.pc.Close() })

	respMAC, ctx := startResponder(t, nsR, Advert{}, log)

	check := func(t *testing.T, got received) {
		t.Helper()
		if got.hopLimit != 255 {
			t.Errorf("hop limit %d, want 255", got.hopLimit)
		}
		if !got.src.IsLinkLocalUnicast() {
			t.Errorf("source %s is not link-local", got.src)
		}
		ra := got.ra
		if ra.RouterLifetime != 0 || ra.Managed || ra.Other || ra.CurHopLimit != 0 || ra.ReachableTime != 0 || ra.RetransTimer != 0 {
			t.Errorf("RA %+v configures something", ra)
		}
		if len(ra.OptionTypes) != 1 || ra.OptionTypes[0] != optSourceLinkLayer || !bytes.Equal(ra.SourceLinkLayer, respMAC) {
			t.Errorf("options %v lladdr %s, want only source link-layer %s", ra.OptionTypes, ra.SourceLinkLayer, respMAC)
		}
	}

	t.Run("unsolicited RA at start", func(t *testing.T) {
		check(t, host.receive(t, 8*time.Second))
	})

	t.Run("solicitation answered", func(t *testing.T) {
		host.drain(300 * time.Millisecond)
		start := time.Now()
		host.solicit(t)
		got := host.receive(t, 3*time.Second)
		t.Logf("RA %s after the RS", time.Since(start))
		check(t, got)
	})

	t.Run("invalid hop limit ignored", func(t *testing.T) {
		host.drain(300 * time.Millisecond)
		host.pc.SetMulticastHopLimit(64)
		host.solicit(t)
		host.pc.SetMulticastHopLimit(255)
		if n := host.count(500 * time.Millisecond); n != 0 {
			t.Fatalf("%d RAs for an RS with hop limit 64, want 0", n)
		}
	})

	t.Run("solicitation flood is coalesced", func(t *testing.T) {
		host.drain(300 * time.Millisecond)
		for range 50 {
			host.solicit(t)
		}
		n := host.count(time.Second)
		t.Logf("50 RSs -> %d RAs", n)
		if n < 1 || n > 12 {
			t.Fatalf("%d RAs for 50 RSs in ~1 s, want 1..12", n)
		}
	})

	t.Run("rdisc6", func(t *testing.T) {
		rdisc6, err := exec.LookPath("rdisc6")
		if err != nil {
			skipOrFail(t, "rdisc6 not installed (Debian package ndisc6)")
		}
		host.drain(300 * time.Millisecond)
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		out, err := exec.CommandContext(cctx, "ip", "netns", "exec", nsH, rdisc6, "-1", "-w", "2000", "vh").CombinedOutput()
		if err != nil {
			t.Fatalf("rdisc6: %v\n%s", err, out)
		}
		t.Logf("rdisc6:\n%s", out)
		for _, want := range []string{"Stateful address conf.    :           No", "Stateful other conf.      :           No", "Router lifetime           :            0 (0x00000000) seconds", "Source link-layer address: " + strings.ToUpper(respMAC.String())} {
			if !strings.Contains(string(out), want) {
				t.Errorf("rdisc6 output lacks %q", want)
			}
		}
		if strings.Contains(string(out), "Prefix") || strings.Contains(string(out), "MTU") {
			t.Error("rdisc6 saw a prefix or MTU option")
		}
	})
}

// startResponder runs a responder for adv on "vr" in nsR until the test
// ends; it returns the responder's MAC and a context ended at cleanup.
func startResponder(t *testing.T, nsR string, adv Advert, log *slog.Logger) (net.HardwareAddr, context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	var respMAC net.HardwareAddr
	started := make(chan error, 1)
	go func() {
		// This goroutine's thread stays in nsR and is discarded when it
		// ends (never unlocked); Run's own goroutine only uses the socket.
		runtime.LockOSThread()
		if err := enterNetns(nsR); err != nil {
			started <- err
			return
		}
		r, err := New("vr", adv, log)
		if err != nil {
			started <- err
			return
		}
		respMAC = r.ifi.HardwareAddr
		started <- nil
		runErr <- r.Run(ctx)
	}()
	if err := <-started; err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(5 * time.Second):
			t.Error("Run did not stop")
		}
	})
	return respMAC, ctx
}

func TestManagedRAEncoding(t *testing.T) {
	mac := net.HardwareAddr{0x52, 0x54, 0, 0x20, 0x20, 1}
	pfx := netip.MustParsePrefix("fd51:0:0:7::/64")
	b, err := Advert{Managed: true, Other: true, Prefixes: []netip.Prefix{pfx}, Autonomous: true}.marshal(mac)
	if err != nil {
		t.Fatal(err)
	}
	ra, err := parseRA(b)
	if err != nil {
		t.Fatal(err)
	}
	if !ra.Managed || !ra.Other || ra.RouterLifetime != 0 || len(ra.Prefixes) != 1 {
		t.Fatalf("decoded %+v", ra)
	}
	p := ra.Prefixes[0]
	if p.Prefix != pfx || !p.OnLink || !p.Autonomous || p.Valid != 86400 || p.Preferred != 14400 {
		t.Fatalf("prefix %+v", p)
	}
	// A=1 only where SLAAC can work (/64).
	b, _ = Advert{Prefixes: []netip.Prefix{netip.MustParsePrefix("fd51::/48")}, Autonomous: true}.marshal(mac)
	if ra, _ = parseRA(b); ra.Prefixes[0].Autonomous || !ra.Prefixes[0].OnLink {
		t.Fatalf("/48 prefix %+v", ra.Prefixes[0])
	}
	if _, err := (Advert{Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}}).marshal(mac); err == nil {
		t.Fatal("an IPv4 prefix was accepted")
	}
}

// TestManagedRAOverVeth: a host whose kernel accepts RAs learns the prefix
// as on-link (and forms a SLAAC address in it), and rdisc6 reads M=1, O=1.
func TestManagedRAOverVeth(t *testing.T) {
	nsR, nsH := vethPair(t)
	pfx := netip.MustParsePrefix("fd51:0:0:9::/64")
	adv := Advert{Managed: true, Other: true, Prefixes: []netip.Prefix{pfx}, Autonomous: true}
	run(t, "ip", "netns", "exec", nsH, "sysctl", "-qw", "net.ipv6.conf.vh.accept_ra=2", "net.ipv6.conf.vh.router_solicitations=1")
	startResponder(t, nsR, adv, slog.New(slog.DiscardHandler))
	deadline := time.Now().Add(10 * time.Second)
	var route, addr []byte
	for {
		route, _ = exec.Command("ip", "-n", nsH, "-6", "route", "show", pfx.String()).CombinedOutput()
		addr, _ = exec.Command("ip", "-n", nsH, "-6", "addr", "show", "dev", "vh", "scope", "global").CombinedOutput()
		// The on-link route comes with the prefix's lifetime ("expires"),
		// the SLAAC address is the prefix plus an interface identifier.
		if strings.Contains(string(route), "expires") && strings.Contains(string(addr), "inet6 fd51::9:") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("host did not take the RA's prefix:\nroute: %s\naddr: %s", route, addr)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("host route: %s", strings.TrimSpace(string(route)))
	if rdisc6, err := exec.LookPath("rdisc6"); err == nil {
		out, err := exec.Command("ip", "netns", "exec", nsH, rdisc6, "-1", "-w", "2000", "vh").CombinedOutput()
		if err != nil {
			t.Fatalf("rdisc6: %v\n%s", err, out)
		}
		for _, want := range []string{"Stateful address conf.    :          Yes", "Stateful other conf.      :          Yes", "Prefix                   : fd51:0:0:9::/64", "Router lifetime           :            0"} {
			if !strings.Contains(string(out), want) {
				t.Errorf("rdisc6 output lacks %q:\n%s", want, out)
			}
		}
	} else {
		skipOrFail(t, "rdisc6 not installed (Debian package ndisc6)")
	}
}

func TestNewUnknownInterface(t *testing.T) {
	if _, err := New("castiron-nope0", Advert{}, nil); err == nil {
		t.Fatal("New accepted a missing interface")
	}
}

// hostSide is a node on the link: it sends RSs and reads RAs.
type hostSide struct {
	pc  *ipv6.PacketConn
	ifi *net.Interface
}

type received struct {
	ra       *routerAdvertisement
	hopLimit int
	src      net.IP
}

func newHostSide(iface string) (*hostSide, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	c, err := icmp.ListenPacket("ip6:ipv6-icmp", "::")
	if err != nil {
		return nil, err
	}
	pc := c.IPv6PacketConn()
	var f ipv6.ICMPFilter
	f.SetAll(true)
	f.Accept(ipv6.ICMPTypeRouterAdvertisement)
	err = errors.Join(
		pc.SetICMPFilter(&f),
		pc.SetMulticastHopLimit(255),
		pc.SetMulticastInterface(ifi),
		pc.SetControlMessage(ipv6.FlagHopLimit|ipv6.FlagSrc|ipv6.FlagInterface, true),
	)
	if err != nil {
		c.Close()
		return nil, err
	}
	return &hostSide{pc: pc, ifi: ifi}, nil
}

// solicit sends an RS (with the host's link-layer address) to all routers.
func (h *hostSide) solicit(t *testing.T) {
	t.Helper()
	body := append([]byte{0, 0, 0, 0, optSourceLinkLayer, 1}, h.ifi.HardwareAddr...)
	b, err := (&icmp.Message{Type: ipv6.ICMPTypeRouterSolicitation, Body: &icmp.RawBody{Data: body}}).Marshal(nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.pc.WriteTo(b, nil, &net.IPAddr{IP: net.ParseIP("ff02::2"), Zone: h.ifi.Name}); err != nil {
		t.Fatal(err)
	}
}

func (h *hostSide) next(timeout time.Duration) (received, error) {
	buf := make([]byte, 1500)
	h.pc.SetReadDeadline(time.Now().Add(timeout))
	for {
		n, cm, _, err := h.pc.ReadFrom(buf)
		if err != nil {
			return received{}, err
		}
		if cm == nil || cm.IfIndex != h.ifi.Index {
			continue
		}
		ra, err := parseRA(buf[:n])
		if err != nil {
			return received{}, err
		}
		return received{ra: ra, hopLimit: cm.HopLimit, src: cm.Src}, nil
	}
}

func (h *hostSide) receive(t *testing.T, timeout time.Duration) received {
	t.Helper()
	got, err := h.next(timeout)
	if err != nil {
		t.Fatalf("no router advertisement: %v", err)
	}
	return got
}

// count reads RAs for d.
func (h *hostSide) count(d time.Duration) int {
	end := time.Now().Add(d)
	n := 0
	for time.Until(end) > 0 {
		if _, err := h.next(time.Until(end)); err == nil {
			n++
		}
	}
	return n
}

func (h *hostSide) drain(d time.Duration) { h.count(d) }

// --- namespaces ---

// vethPair makes two namespaces with random names joined by a veth pair
// (vr in the first, vh in the second), both up with a usable link-local
// address at once (DAD off, NOTES gotcha 16) and without the kernel's own
// router solicitations, so every RS on the link is the test's.
func vethPair(t *testing.T) (nsR, nsH string) {
	t.Helper()
	if os.Geteuid() != 0 {
		skipOrFail(t, "needs root for network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		skipOrFail(t, "ip (iproute2) not installed")
	}
	suffix := make([]byte, 4)
	rand.Read(suffix)
	nsR = "castiron-ra-r-" + hex.EncodeToString(suffix)
	nsH = "castiron-ra-h-" + hex.EncodeToString(suffix)
	run(t, "ip", "netns", "add", nsR)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", nsR).Run() })
	run(t, "ip", "netns", "add", nsH)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", nsH).Run() })
	run(t, "ip", "-n", nsR, "link", "add", "vr", "type", "veth", "peer", "name", "vh", "netns", nsH)
	run(t, "ip", "netns", "exec", nsR, "sysctl", "-qw", "net.ipv6.conf.vr.accept_dad=0")
	run(t, "ip", "netns", "exec", nsH, "sysctl", "-qw", "net.ipv6.conf.vh.accept_dad=0", "net.ipv6.conf.vh.router_solicitations=0")
	run(t, "ip", "-n", nsR, "link", "set", "vr", "up")
	run(t, "ip", "-n", nsH, "link", "set", "vh", "up")
	waitLinkLocal(t, nsR, "vr")
	waitLinkLocal(t, nsH, "vh")
	return nsR, nsH
}

// waitLinkLocal waits until the interface has its (non-tentative)
// link-local address, i.e. carrier is up and IPv6 is ready on it.
func waitLinkLocal(t *testing.T, ns, dev string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		out, _ := exec.Command("ip", "-n", ns, "-6", "addr", "show", "dev", dev, "scope", "link").CombinedOutput()
		if strings.Contains(string(out), "fe80::") && !strings.Contains(string(out), "tentative") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s in %s has no usable link-local address:\n%s", dev, ns, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// enterNetns moves the calling thread into the named namespace; the caller
// must hold runtime.LockOSThread and never unlock it.
func enterNetns(name string) error {
	fd, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Setns(fd, unix.CLONE_NEWNET)
}

// inNetns runs fn on a thread inside the namespace; sockets made there
// stay in that namespace after the thread is gone.
func inNetns[T any](t *testing.T, ns string, fn func() (T, error)) T {
	t.Helper()
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread exits with the goroutine
		if err := enterNetns(ns); err != nil {
			ch <- result{err: err}
			return
		}
		v, err := fn()
		ch <- result{v, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

// skipOrFail skips, except in CI, where a missing prerequisite fails.
func skipOrFail(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(why + " (required in CI)")
	}
	t.Skip(why)
}
