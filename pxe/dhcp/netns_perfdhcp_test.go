package dhcp

import (
	"context"
	"encoding/hex"
	"fmt"
	"net"
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

// TestNetnsPerfdhcpRelay: Kea's perfdhcp, in relay mode (unicast from port
// 67 with giaddr, as the benchmark runs it), completes DORAs over real
// sockets. A smoke test of compatibility, not a measurement.
func TestNetnsPerfdhcpRelay(t *testing.T) {
	needRoot(t, "ip", "perfdhcp")
	l := newLab(t)
	sh(t, "ip", "-n", l.cliNS, "addr", "add", "10.201.50.2/24", "dev", l.cliIf)
	st := openStore(t, filepath.Join(l.dir, "castiron.db"))
	l.start(t, Config{
		RangeStart: netip.MustParseAddr("10.201.50.10"), RangeEnd: netip.MustParseAddr("10.201.50.250"),
		Netmask: net.CIDRMask(24, 32), BootFiles: BootFiles{ScriptURL: scriptURL},
	}, &allowGate{all: true}, st, boot.Discard{})
	out, err := exec.Command("ip", "netns", "exec", l.cliNS, "perfdhcp", "-4", "-l", "10.201.50.2",
		"-r", "200", "-R", "100", "-p", "2", "-o", "60,"+hex.EncodeToString([]byte("PXEClient:Arch:00000:UNDI:002001")),
		"-o", "93,0000", "10.201.50.1").CombinedOutput()
	// perfdhcp exits 3 when packets were dropped; judge by its statistics.
	text := string(out)
	if err != nil && !strings.Contains(text, "Statistics for: REQUEST-ACK") {
		t.Fatalf("perfdhcp: %v\n%s", err, text)
	}
	_, ra, _ := strings.Cut(text, "Statistics for: REQUEST-ACK")
	var sent, recv int
	for _, line := range strings.Split(ra, "\n") {
		if v, ok := strings.CutPrefix(line, "sent packets: "); ok && sent == 0 {
			fmt.Sscan(v, &sent)
		}
		if v, ok := strings.CutPrefix(line, "received packets: "); ok && recv == 0 {
			fmt.Sscan(v, &recv)
		}
	}
	t.Logf("perfdhcp REQUEST-ACK sent %d received %d", sent, recv)
	if sent == 0 || recv < sent*9/10 {
		t.Fatalf("perfdhcp: %d ACKs for %d REQUESTs\n%s", recv, sent, text)
	}
	ls, err := st.ListLeases(context.Background())
	if err != nil || len(ls) == 0 {
		t.Fatalf("no leases stored: %v", err)
	}
}

// BenchmarkNetnsPerfdhcp runs perfdhcp in relay mode against the server over
// a veth, as pxe-bench in ../shared (beside the repository) does (10,000 clients), at
// PERFDHCP_RATE DORA/s (default 12000) for PERFDHCP_SECONDS (default 10),
// once per iteration: run it with -benchtime 1x. Reports the achieved
// DORA/s and the drop percentage.
func BenchmarkNetnsPerfdhcp(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root")
	}
	if _, err := exec.LookPath("perfdhcp"); err != nil {
		b.Skip("needs perfdhcp")
	}
	rate, secs := os.Getenv("PERFDHCP_RATE"), os.Getenv("PERFDHCP_SECONDS")
	if rate == "" {
		rate = "12000"
	}
	if secs == "" {
		secs = "10"
	}
	b.StopTimer()
	for range b.N {
		l := newLabB(b)
		sh(b, "ip", "-n", l.cliNS, "addr", "add", "10.201.0.2/16", "dev", l.cliIf)
		sh(b, "ip", "-n", l.srvNS, "addr", "add", "10.201.0.1/16", "dev", l.srvIf)
		st := openStore(b, filepath.Join(b.TempDir(), "castiron.db"))
		cfg := Config{
			Interface: l.srvIf, ServerIP: netip.MustParseAddr("10.201.0.1"),
			RangeStart: netip.MustParseAddr("10.201.1.0"), RangeEnd: netip.MustParseAddr("10.201.255.254"),
			Netmask: net.CIDRMask(16, 32), BootFiles: BootFiles{ScriptURL: scriptURL},
		}
		fmt.Sscan(os.Getenv("PERFDHCP_WORKERS"), &cfg.Workers)
		s := newTestServer(b, cfg, &allowGate{all: true}, st, boot.Discard{}, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			runtime.LockOSThread()
			if err := setns(l.srvNS); err != nil {
				done <- err
				return
			}
			done <- s.Run(ctx)
		}()
		time.Sleep(300 * time.Millisecond)
		cpu0 := cpuTime()
		b.StartTimer()
		args := []string{"netns", "exec", l.cliNS}
		if cpu := os.Getenv("PERFDHCP_CPU"); cpu != "" {
			args = append(args, "taskset", "-c", cpu) // pin the load generator
		}
		out, _ := exec.Command("ip", append(args, "perfdhcp", "-4", "-l", "10.201.0.2",
			"-r", rate, "-R", "10000", "-p", secs, "-s", "42",
			"-o", "60,"+hex.EncodeToString([]byte("PXEClient:Arch:00000:UNDI:002001")), "-o", "93,0000", "-o", "94,010201",
			"10.201.0.1")...).CombinedOutput()
		b.StopTimer()
		cpu := cpuTime() - cpu0
		cancel()
		<-done
		text := string(out)
		_, ra, _ := strings.Cut(text, "Statistics for: REQUEST-ACK")
		var sent, recv int
		for _, line := range strings.Split(ra, "\n") {
			if v, ok := strings.CutPrefix(line, "sent packets: "); ok && sent == 0 {
				fmt.Sscan(v, &sent)
			}
			if v, ok := strings.CutPrefix(line, "received packets: "); ok && recv == 0 {
				fmt.Sscan(v, &recv)
			}
		}
		if sent == 0 {
			b.Fatalf("perfdhcp:\n%s", text)
		}
		if os.Getenv("PERFDHCP_SHOW") != "" {
			b.Log(text)
		}
		var d float64
		fmt.Sscan(secs, &d)
		b.ReportMetric(float64(recv)/d, "DORA/s")
		b.ReportMetric(100*float64(sent-recv)/float64(sent), "drop%")
		b.ReportMetric(float64(cpu)/float64(max(recv, 1))/1e3, "srv-cpu-µs/DORA")
	}
}
