//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// The BMC's credentials and addresses inside the lab's namespace. The
// namespace is the test's own, so fixed ports cannot collide.
const (
	BMCUser     = "admin"
	BMCPassword = "password"
	BMCAddress  = "127.0.0.1"
	BMCPort     = 623  // UDP, RMCP/RMCP+
	bmcVMPort   = 9002 // TCP, the "serial 15 ... codec VM" channel ipmi_sim insists on (gotcha 14)
	monitorPort = 4444 // TCP, qemu's HMP monitor (reset, ACPI power button)
	// BMCCipherSuite is the only suite ipmi_sim 2.0.33 accepts (17 is refused,
	// and it never answers Get Channel Cipher Suites).
	BMCCipherSuite = 3
	// BMCInbandAddress is the BMC's LAN address in a lab with an in-band
	// BMC: what the BMC reports over KCS (lan_config_program) and where it
	// listens, on the namespace's loopback (INBAND-IPMI.md, quirk 3). Not
	// on the provisioning bridge's subnet, as a BMC port usually is not.
	BMCInbandAddress = "10.205.9.2"
	// BMCInbandMAC is the BMC's MAC as it reports it in-band.
	BMCInbandMAC = "02:e2:e0:00:09:02"
)

// bmcEmu describes one BMC at IPMB 0x20 with a SEL; power and boot device
// go to the chassis_control program.
const bmcEmu = `mc_setbmc 0x20
mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr
sel_enable 0x20 1000 0x0a
mc_enable 0x20
`

// bmcLanConf is ipmi_sim's lan.conf: LAN channel and VM-codec channel at
// addr, the chassis program and the admin user; lanProgram, when set,
// answers the LAN parameters the BMC reports (in-band BMC).
func bmcLanConf(addr, lanProgram, chassisScript, envFile string) string {
	if lanProgram != "" {
		lanProgram = fmt.Sprintf("    lan_config_program \"%s\"\n", lanProgram)
	}
	return fmt.Sprintf(`name "e2ebmc"
set_working_mc 0x20
  startlan 1
    addr %[1]s %[2]d
%[8]s    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  # without a VM-codec channel ipmi_sim answers power control with "invalid data field"
  serial 15 %[1]s %[3]d codec VM
  # power, reset, soft off and boot device all go to this program
  chassis_control "/bin/bash %[4]s %[5]s"
  user 2 true "%[6]s" "%[7]s" admin 10 none md2 md5 straight
`, addr, BMCPort, bmcVMPort, chassisScript, envFile, BMCUser, BMCPassword, lanProgram)
}

// startBMC writes the simulator's config into dir and starts ipmi_sim inside
// the lab's namespace; it returns once the LAN port is bound.
func (l *Lab) startBMC(ctx context.Context) error {
	dir := filepath.Join(l.Dir, "ipmi")
	state := filepath.Join(dir, "state") // users and LAN settings persist here (-s)
	if err := os.MkdirAll(state, 0o755); err != nil {
		return err
	}
	lan := filepath.Join(dir, "lan.conf")
	emu := filepath.Join(dir, "bmc.emu")
	program := ""
	if l.Opts.InbandBMC {
		program = fmt.Sprintf("/bin/bash %s %s %s", filepath.Join(filepath.Dir(l.chassisScript), "bmc-lan.sh"), BMCInbandAddress, BMCInbandMAC)
	}
	conf := bmcLanConf(l.BMCAddr(), program, l.chassisScript, l.envPath)
	if l.sol != nil {
		conf += fmt.Sprintf("  sol \"tcp:%s\" 115200\n", l.sol.addr)
	}
	if err := os.WriteFile(lan, []byte(conf), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(emu, []byte(bmcEmu), 0o644); err != nil {
		return err
	}
	// -n: no console on stdin (required in the background).
	cmd := l.NS.Command(context.Background(), "ipmi_sim", "-n", "-c", lan, "-f", emu, "-s", state)
	cmd.Dir = dir
	d, err := startDaemon("ipmi_sim", cmd, filepath.Join(l.Dir, "ipmi_sim.log"))
	if err != nil {
		return err
	}
	l.bmc = d
	ip := net.ParseIP(l.BMCAddr()).To4()
	// /proc/net/udp: the address's bytes in host (little-endian) order.
	want := fmt.Appendf(nil, " %02X%02X%02X%02X:%04X ", ip[3], ip[2], ip[1], ip[0], BMCPort)
	for {
		// /proc/PID/net/udp shows the sockets of PID's namespace.
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(d.PID()) + "/net/udp")
		if bytes.Contains(b, want) {
			return nil
		}
		if !d.running() {
			log, _ := os.ReadFile(filepath.Join(l.Dir, "ipmi_sim.log"))
			return fmt.Errorf("ipmi_sim exited: %v: %s", d.err, log)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ipmi_sim not listening on %s:%d: %w", l.BMCAddr(), BMCPort, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// BMCAddr is the address the BMC listens on: the namespace's loopback,
// the bridge's address with LabOptions.BMCOnBridge, or BMCInbandAddress
// with LabOptions.InbandBMC.
func (l *Lab) BMCAddr() string {
	switch {
	case l.Opts.BMCOnBridge:
		return ServerIP
	case l.Opts.InbandBMC:
		return BMCInbandAddress
	}
	return BMCAddress
}

// DriverInfo is the driver_info of an ipmi node for this lab's BMC, as
// castiron (running in the same namespace) reaches it.
func (l *Lab) DriverInfo() map[string]any {
	return map[string]any{
		"ipmi_address":      l.BMCAddr(),
		"ipmi_port":         BMCPort,
		"ipmi_username":     BMCUser,
		"ipmi_password":     BMCPassword,
		"ipmi_cipher_suite": BMCCipherSuite,
	}
}

// Ipmitool runs ipmitool inside the namespace against the lab's BMC (-C 3:
// without it every call first stalls ~10 s, gotcha 14).
func (l *Lab) Ipmitool(ctx context.Context, args ...string) (string, error) {
	return l.IpmitoolAs(ctx, BMCUser, BMCPassword, args...)
}

// IpmitoolAs is Ipmitool as another BMC user.
func (l *Lab) IpmitoolAs(ctx context.Context, user, password string, args ...string) (string, error) {
	base := []string{"-I", "lanplus", "-C", strconv.Itoa(BMCCipherSuite), "-H", l.BMCAddr(),
		"-p", strconv.Itoa(BMCPort), "-U", user, "-P", password}
	return l.NS.Run(ctx, "ipmitool", append(base, args...)...)
}

// BMCUserPassword reads the password of the BMC user name from ipmi_sim's
// persisted state (users.mc20: "N.username:d:NAME\00..." and
// "N.passwd:d:PASSWORD\00..." lines), as only the BMC itself knows it.
func (l *Lab) BMCUserPassword(name string) (string, error) {
	b, err := os.ReadFile(filepath.Join(l.Dir, "ipmi", "state", "ipmi_sim", "e2ebmc", "users.mc20"))
	if err != nil {
		return "", err
	}
	field := func(line, key string) (id, value string, ok bool) {
		id, rest, ok := strings.Cut(line, "."+key+":d:")
		value, _, _ = strings.Cut(rest, `\00`)
		return id, value, ok
	}
	lines := strings.Split(string(b), "\n")
	for _, line := range lines {
		if id, user, ok := field(line, "username"); ok && user == name {
			for _, other := range lines {
				if pid, pw, ok := field(other, "passwd"); ok && pid == id {
					return pw, nil
				}
			}
		}
	}
	return "", fmt.Errorf("ipmi_sim has no user %q", name)
}

// PowerStatus asks the BMC: true for "on".
func (l *Lab) PowerStatus(ctx context.Context) (bool, error) {
	out, err := l.Ipmitool(ctx, "chassis", "power", "status")
	if err != nil {
		return false, err
	}
	switch f := strings.Fields(out); {
	case len(f) > 0 && f[len(f)-1] == "on":
		return true, nil
	case len(f) > 0 && f[len(f)-1] == "off":
		return false, nil
	}
	return false, fmt.Errorf("unexpected power status %q", strings.TrimSpace(out))
}

// BootDevice is what the BMC will boot next (pxe, default=disk, ...), as the
// chassis program stored it.
func (l *Lab) BootDevice() string {
	b, _ := os.ReadFile(l.bootdevPath)
	return strings.TrimSpace(string(b))
}
