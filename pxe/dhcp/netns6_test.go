package dhcp

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"castiron/pxe/boot"
)

// TestNetnsDHCPv6 runs Server6 on one end of a veth pair and ISC dhclient -6
// on the other: Solicit/Advertise/Request/Reply over real sockets (multicast
// to ff02::1:2, answers to the client's link-local address), the lease in
// SQLite, and after a server restart on the same database the client gets
// the same address again; a refused MAC gets nothing.
func TestNetnsDHCPv6(t *testing.T) {
	needRoot(t, "ip", "dhclient")
	l := newLab(t)
	sh(t, "ip", "netns", "exec", l.srvNS, "sysctl", "-qw", "net.ipv6.conf."+l.srvIf+".accept_dad=0")
	sh(t, "ip", "netns", "exec", l.cliNS, "sysctl", "-qw", "net.ipv6.conf."+l.cliIf+".accept_dad=0")
	sh(t, "ip", "-n", l.srvNS, "addr", "add", "fd51:201:50::1/64", "dev", l.srvIf, "nodad")
	// The interfaces were set up before DAD was turned off: cycle them so
	// their link-local addresses are usable at once.
	for _, c := range [][]string{{l.srvNS, l.srvIf}, {l.cliNS, l.cliIf}} {
		sh(t, "ip", "-n", c[0], "link", "set", c[1], "down")
		sh(t, "ip", "-n", c[0], "link", "set", c[1], "up")
	}
	for _, c := range [][]string{{l.srvNS, l.srvIf}, {l.cliNS, l.cliIf}} {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			out, _ := exec.Command("ip", "-n", c[0], "-6", "addr", "show", "dev", c[1], "scope", "link").CombinedOutput()
			if strings.Contains(string(out), "fe80::") && !strings.Contains(string(out), "tentative") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s has no link-local address:\n%s", c[1], out)
			}
		}
	}
	dbPath := filepath.Join(l.dir, "castiron.db")
	cfg := config6()
	cfg.Interface, cfg.ServerMAC = l.srvIf, nil
	cfg.ServerAddr = netip.MustParseAddr("fd51:201:50::1")
	cfg.RangeStart, cfg.RangeEnd = netip.MustParseAddr("fd51:201:50::100"), netip.MustParseAddr("fd51:201:50::1ff")

	start := func(gate boot.Gate, rec boot.Recorder) (*Server6, func()) {
		st := openStore(t, dbPath)
		log := &testLog{}
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("server log:\n%s", log.String())
			}
		})
		var s *Server6
		if err := inNetns(l.srvNS, func() (err error) {
			s, err = New6(cfg, gate, st.Leases6(), rec, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
			return err
		}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
			if err := setns(l.srvNS); err != nil {
				done <- err
				return
			}
			done <- s.Run(ctx)
		}()
		for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), "dhcp6 server listening"); {
			if time.Now().After(deadline) {
				t.Fatalf("dhcp6 server not listening:\n%s", log.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		return s, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
			st.Close()
		}
	}

	rec := &events{}
	_, stop := start(gateFor(l.cliMAC.String()), rec)
	d := l.dhclient6(t)
	line, _ := d.wait(t, "BOUND6", 0, 20*time.Second)
	addr := field(line, "ip6")
	if a, err := netip.ParseAddr(addr); err != nil || a.Less(cfg.RangeStart) || cfg.RangeEnd.Less(a) {
		t.Fatalf("dhclient -6 bound %q, not from the range (%s)", addr, line)
	}
	d.kill()
	k := strings.Join(rec.kinds(l.cliMAC.String()), ",")
	if !strings.HasPrefix(k, "dhcp_discover,dhcp_offer,dhcp_request,dhcp_ack") {
		t.Fatalf("timeline %s", k)
	}
	stop()

	// Restart on the same database; a fresh dhclient (no lease file: a
	// machine rebooted into the next stage) gets the same address.
	os.Remove(filepath.Join(l.dir, "dhclient6.leases"))
	_, stop = start(gateFor(l.cliMAC.String()), nil)
	d = l.dhclient6(t)
	line, _ = d.wait(t, "BOUND6", 0, 20*time.Second)
	if got := field(line, "ip6"); got != addr {
		t.Fatalf("after restart %s, had %s", got, addr)
	}
	d.kill()
	stop()

	// A machine the gate refuses gets no answer.
	_, stop = start(gateFor(), nil)
	defer stop()
	os.Remove(filepath.Join(l.dir, "dhclient6.leases"))
	d = l.dhclient6(t)
	time.Sleep(4 * time.Second)
	if b, _ := os.ReadFile(d.out); strings.Contains(string(b), "BOUND6") {
		t.Fatalf("refused MAC was answered:\n%s", b)
	}
}

// dhclient6 runs ISC dhclient -6 (stateful) in the client namespace; its
// script logs "REASON ip6=..".
func (l *lab) dhclient6(t *testing.T) *dhclient {
	t.Helper()
	script := filepath.Join(l.dir, "dhclient6-script")
	out := filepath.Join(l.dir, "dhclient6.log")
	os.Remove(out)
	os.WriteFile(script, []byte("#!/bin/sh\necho \"$reason ip6=$new_ip6_address\" >> "+out+"\nexit 0\n"), 0o755)
	d := &dhclient{out: out}
	d.cmd = exec.Command("ip", "netns", "exec", l.cliNS, "dhclient", "-6", "-d", "-1", "-v", "-sf", script, "-cf", "/dev/null",
		"-lf", filepath.Join(l.dir, "dhclient6.leases"), "-pf", filepath.Join(l.dir, "dhclient6.pid"), l.cliIf)
	stderr, err := os.Create(out + ".stderr")
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout, d.cmd.Stderr = stderr, stderr
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.kill()
		stderr.Close()
		if t.Failed() {
			b, _ := os.ReadFile(out + ".stderr")
			t.Logf("dhclient -6:\n%s", b)
		}
	})
	return d
}
