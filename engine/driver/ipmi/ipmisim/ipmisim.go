// Package ipmisim starts real ipmi_sim (OpenIPMI) processes on 127.0.0.1 for
// tests: the ipmi driver's own suite and the client workflow suite both drive
// simulated BMCs through it. It is test support only; nothing in the binary
// imports it.
package ipmisim

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// User and Password are the admin credentials every simulated BMC has.
const (
	User     = "admin"
	Password = "password"
)

// Sim is one real ipmi_sim process on 127.0.0.1 with a chassis_control
// script that keeps power state and boot device in files under Dir.
type Sim struct {
	Port int
	Dir  string
	PID  int
}

// chassisScript is ipmi_sim's chassis_control program (see OpenIPMI
// lanserv/bmc_chassis.c and lab/bmc-chassis.sh of ../shared). ipmi_sim runs it
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

// RequireSim skips the test when ipmi_sim is missing, unless CI=true, where a
// missing simulator is a failure.
func RequireSim(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("ipmi_sim"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ipmi_sim not installed (apt-get install -y openipmi ipmitool): %v", err)
		}
		t.Skip("ipmi_sim not installed (apt-get install -y openipmi ipmitool)")
	}
}

// StartSim starts ipmi_sim on a free UDP port of 127.0.0.1 and stops it (by
// its PID) when the test ends.
func StartSim(t testing.TB) *Sim { t.Helper(); return StartSimConf(t, "") }

// StartSimSOL is StartSim with Serial-over-LAN: ipmi_sim connects, as a TCP
// client, to serial ("host:port", what the node's serial port serves) when a
// SOL payload is activated.
func StartSimSOL(t testing.TB, serial string) *Sim {
	t.Helper()
	return StartSimConf(t, fmt.Sprintf("  sol \"tcp:%s\" 115200\n", serial))
}

// StartSimConf is StartSim with extra lan.conf lines for the BMC at 0x20.
func StartSimConf(t testing.TB, extra string) *Sim {
	t.Helper()
	RequireSim(t)
	var lastErr error
	for range 5 { // the free port may be taken between probe and bind
		s, err := trySim(t, extra)
		if err == nil {
			return s
		}
		lastErr = err
	}
	t.Fatalf("start ipmi_sim: %v", lastErr)
	return nil
}

func trySim(t testing.TB, extra string) (*Sim, error) {
	dir := t.TempDir()
	port, err := FreeUDPPort()
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
  chassis_control "'%s' '%s'"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, port, filepath.Join(dir, "chassis.sh"), dir, User, Password) + extra, // quoted: ipmi_sim popen()s the line through sh, and a test's temp dir may hold "(" (subtest names)
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
	return &Sim{Port: port, Dir: dir, PID: cmd.Process.Pid}, nil
}

// FreeUDPPort asks the kernel for an unused UDP port on 127.0.0.1.
func FreeUDPPort() (int, error) {
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

// DriverInfo is the driver_info of an ipmi node managed by this simulator.
func (s *Sim) DriverInfo() map[string]any {
	return map[string]any{
		"ipmi_address":  "127.0.0.1",
		"ipmi_port":     s.Port,
		"ipmi_username": User,
		"ipmi_password": Password,
	}
}

// File reads one of the chassis script's state files.
func (s *Sim) File(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(s.Dir, name))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// SetFile writes one of the chassis script's state files.
func (s *Sim) SetFile(t testing.TB, name, value string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(s.Dir, name), []byte(value+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Ipmitool runs the real ipmitool against the simulator (suite 3: ipmi_sim
// never answers Get Channel Cipher Suites) for cross-checks.
func (s *Sim) Ipmitool(t testing.TB, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("ipmitool"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("ipmitool not installed: %v", err)
		}
		t.Skip("ipmitool not installed")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	base := []string{"-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(s.Port),
		"-U", User, "-P", Password}
	out, err := exec.CommandContext(ctx, "ipmitool", append(base, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ipmitool %v: %v: %s", args, err, out)
	}
	return string(out)
}
