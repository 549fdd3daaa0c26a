package workflow

// A copy of engine/driver/ipmi/bmcsim_test.go's simulator start-up (it lives
// in another package's tests): real ipmi_sim processes on 127.0.0.1.

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
