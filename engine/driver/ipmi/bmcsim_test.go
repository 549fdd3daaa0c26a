package ipmi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// simUser and simPassword are the admin credentials every simulated BMC has.
const (
	simUser     = "admin"
	simPassword = "password"
)

// bmcSim is one real ipmi_sim process on 127.0.0.1 with a chassis_control
// script that keeps power state and boot device in files under dir.
type bmcSim struct {
	port int
	dir  string
	pid  int
}

// chassisScript is ipmi_sim's chassis_control program (see OpenIPMI
// lanserv/bmc_chassis.c and /work/shared/lab/bmc-chassis.sh). ipmi_sim runs it
// with popen() and reads its stdout until EOF in its only thread, so it must
// return at once and leave no child behind. "set shutdown" (ACPI soft off)
// does not turn the power off at once: it records a deadline that "get power"
// honours, like an OS that takes a moment to shut down.
const chassisScript = `#!/bin/sh
dir=$1; op=$2; shift 2
case "$op" in
get)
  for p in "$@"; do
    case "$p" in
    power)
      if [ -f "$dir/softoff_at" ]; then
        read at < "$dir/softoff_at"
        if [ $(( $(date +%s%N) / 1000000 )) -ge "$at" ]; then
          echo 0 > "$dir/power"; rm -f "$dir/softoff_at"; echo "softoff done" >> "$dir/events"
        fi
      fi
      read v < "$dir/power"; echo "power:$v" ;;
    boot) read v < "$dir/boot"; echo "boot:$v" ;;
    *) echo "Invalid parameter: $p"; exit 1 ;;
    esac
  done ;;
set)
  while [ $# -gt 1 ]; do
    echo "set $1 $2" >> "$dir/events"
    case "$1" in
    power) echo "$2" > "$dir/power"; rm -f "$dir/softoff_at" ;;
    reset) ;;
    shutdown)
      read ignore < "$dir/softoff_ignore"
      if [ "$ignore" != 1 ]; then
        read delay < "$dir/softoff_delay_ms"
        echo $(( $(date +%s%N) / 1000000 + delay )) > "$dir/softoff_at"
      fi ;;
    boot) echo "$2" > "$dir/boot" ;;
    identify) ;;
    *) echo "Invalid parameter: $1"; exit 1 ;;
    esac
    shift 2
  done ;;
*) exit 1 ;;
esac
exit 0
`

// simEmu describes one BMC at IPMB 0x20; nothing else is needed for chassis
// commands.
const simEmu = `mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
mc_enable 0x20
`

// requireSim skips the test when ipmi_sim is missing, unless CI=true, where a
// missing simulator is a failure.
func requireSim(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ipmi_sim"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ipmi_sim not installed (apt-get install -y openipmi ipmitool): %v", err)
		}
		t.Skip("ipmi_sim not installed (apt-get install -y openipmi ipmitool)")
	}
}

// startSim starts ipmi_sim on a free UDP port of 127.0.0.1 and stops it (by
// its PID) when the test ends.
func startSim(t testing.TB) *bmcSim {
	t.Helper()
	requireSim(t)
	var lastErr error
	for range 5 { // the free port may be taken between probe and bind
		s, err := trySim(t)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("start ipmi_sim: %v", lastErr)
	return nil
}

func trySim(t testing.TB) (*bmcSim, error) {
	dir := t.TempDir()
	port, err := freeUDPPort()
	if err != nil {
		return nil, err
	}
	files := map[string]string{
		"chassis.sh":       chassisScript,
		"power":            "0\n",
		"boot":             "default\n",
		"softoff_delay_ms": "300\n",
		"softoff_ignore":   "0\n",
		"events":           "",
		"sim.emu":          simEmu,
		"lan.conf": fmt.Sprintf(`name "testbmc"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "%s %s"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, port, filepath.Join(dir, "chassis.sh"), dir, simUser, simPassword),
	}
	for name, body := range files {
		mode := os.FileMode(0o644)
		if strings.HasSuffix(name, ".sh") {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), mode); err != nil {
			return nil, err
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "state"), 0o755); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	// -n: no console on stdin; -s: users and LAN settings persist there, so
	// each simulator gets its own.
	cmd := exec.Command("ipmi_sim", "-n", "-c", filepath.Join(dir, "lan.conf"),
		"-f", filepath.Join(dir, "sim.emu"), "-s", filepath.Join(dir, "state"))
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	stop := func() {
		_ = cmd.Process.Kill() // only the process this test started
		<-exited
	}
	deadline := time.Now().Add(5 * time.Second)
	for !udpListening(port) {
		select {
		case <-exited:
			return nil, fmt.Errorf("ipmi_sim exited early: %s", out.String())
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("ipmi_sim not listening on %d after 5s: %s", port, out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Cleanup(stop)
	return &bmcSim{port: port, dir: dir, pid: cmd.Process.Pid}, nil
}

// freeUDPPort asks the kernel for an unused UDP port on 127.0.0.1.
func freeUDPPort() (int, error) {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port, nil
}

// udpListening reports whether something is bound to 127.0.0.1:port (UDP).
func udpListening(port int) bool {
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		return false
	}
	return bytes.Contains(b, fmt.Appendf(nil, " 0100007F:%04X ", port))
}

func (s *bmcSim) driverInfo() map[string]any {
	return map[string]any{
		"ipmi_address":  "127.0.0.1",
		"ipmi_port":     s.port,
		"ipmi_username": simUser,
		"ipmi_password": simPassword,
	}
}

// file reads one of the chassis script's state files.
func (s *bmcSim) file(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (s *bmcSim) setFile(t testing.TB, name, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.dir, name), []byte(value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// ipmitool runs the real ipmitool against the simulator (suite 3: ipmi_sim
// never answers Get Channel Cipher Suites) for cross-checks.
func (s *bmcSim) ipmitool(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("ipmitool"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ipmitool not installed: %v", err)
		}
		t.Skip("ipmitool not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := []string{"-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(s.port),
		"-U", simUser, "-P", simPassword}
	out, err := exec.CommandContext(ctx, "ipmitool", append(base, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ipmitool %v: %v: %s", args, err, out)
	}
	return string(out)
}

// udpRelay sits between the driver and a simulator on 127.0.0.1 and keeps a
// copy of every datagram the driver sent: with IPMI 1.5 the messages are
// signed but not encrypted, so a test can read the exact request bytes.
type udpRelay struct {
	port int
	mu   sync.Mutex
	sent [][]byte
}

func startRelay(t testing.TB, target int) *udpRelay {
	t.Helper()
	down, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	up, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: target})
	if err != nil {
		t.Fatal(err)
	}
	r := &udpRelay{port: down.LocalAddr().(*net.UDPAddr).Port}
	var client *net.UDPAddr
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // driver -> simulator
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, from, err := down.ReadFromUDP(buf)
			if err != nil {
				return
			}
			r.mu.Lock()
			client = from
			r.sent = append(r.sent, append([]byte(nil), buf[:n]...))
			r.mu.Unlock()
			_, _ = up.Write(buf[:n])
		}
	}()
	go func() { // simulator -> driver
		defer wg.Done()
		buf := make([]byte, 4096)
		for {
			n, err := up.Read(buf)
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				continue // ICMP errors while nobody listens
			}
			r.mu.Lock()
			to := client
			r.mu.Unlock()
			if to != nil {
				_, _ = down.WriteToUDP(buf[:n], to)
			}
		}
	}()
	t.Cleanup(func() { down.Close(); up.Close(); wg.Wait() })
	return r
}

// bootFlagRequests returns the 5 data bytes of every Set System Boot Options
// parameter 5 request the driver sent: IPMI message rsAddr 0x20, netFn
// chassis (0x00), checksum 0xe0, rqAddr, rqSeq, cmd 0x08, param 0x05.
func (r *udpRelay) bootFlagRequests() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out [][]byte
	for _, p := range r.sent {
		for i := 0; i+12 <= len(p); i++ {
			if p[i] == 0x20 && p[i+1] == 0x00 && p[i+2] == 0xe0 && p[i+5] == 0x08 && p[i+6] == 0x05 {
				out = append(out, p[i+7:i+12])
			}
		}
	}
	return out
}

// newTestDriver logs through t.Log, so a driver's log lines show up next to
// the test that caused them.
func newTestDriver(t testing.TB, cfg Config) *Driver {
	cfg.Logger = slog.New(slog.NewTextHandler(testLog{t}, nil))
	return New(cfg)
}

type testLog struct{ t testing.TB }

func (w testLog) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}
