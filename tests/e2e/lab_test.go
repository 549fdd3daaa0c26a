//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The lab's provisioning network (inside the namespace only).
const (
	Bridge    = "br0"
	ServerIP  = "10.205.0.1"
	labPrefix = 24
	// ServerIP6 is the bridge's address in an IPv6-only lab (a ULA /64).
	ServerIP6 = "fd52:205::1"
	// DHCPRange is what castiron hands out on Bridge.
	DHCPRange = "10.205.0.100,10.205.0.199"
)

// DiskSpec is one virtio-blk disk of the VM: a sparse raw file.
type DiskSpec struct {
	SizeGiB int
	Serial  string // virtio-blk serial, at most 20 characters
}

// LabOptions shape the VM. Zero values take the defaults in brackets.
type LabOptions struct {
	Boot  string     // "bios" (SeaBIOS + iPXE NIC ROM) or "uefi" (OVMF, EDK2 PXE) ["bios"]
	Disks []DiskSpec // [one 5 GiB disk, serial E2EDISK0]
	MemMB int        // -m [1024]
	CPUs  int        // -smp [1]
	NICs  int        // virtio-net NICs, each on its own tap in Bridge; the first boots [1]
	// IPv6Only gives the bridge ServerIP6/64 and no IPv4 address: castiron
	// serves DHCPv6 and router advertisements, the VM boots over IPv6 (UEFI:
	// OVMF's PXEv4 is switched off, so PXEv6 runs first).
	IPv6Only bool
	// BMCOnBridge makes the BMC listen on ServerIP instead of the
	// namespace's loopback, so conductors in other namespaces attached to
	// the bridge reach it too (IPv4 labs only).
	BMCOnBridge bool
	// InbandBMC connects the VM's KCS system interface to the lab's BMC
	// (qemu ipmi-bmc-extern + isa-ipmi-kcs to ipmi_sim's VM-codec port),
	// which then reports BMCInbandAddress and BMCInbandMAC, and listens
	// there (INBAND-IPMI.md).
	InbandBMC bool
	// Arch "aarch64" runs qemu-system-aarch64 (virt machine, Cortex-A57,
	// AAVMF UEFI firmware, TCG) instead of an x86-64 PC; Boot is then uefi.
	Arch string
	// SOL gives the BMC a Serial-over-LAN device wired to the VM's serial
	// port (sol_test.go): ipmi_sim connects to a relay the test serves,
	// which copies the VM's output to it and its input to the VM.
	SOL bool
}

func (o *LabOptions) defaults() error {
	if o.Arch == "" {
		o.Arch = "x86_64"
	}
	if o.Arch == "aarch64" {
		o.Boot = "uefi"
	}
	if o.Arch != "x86_64" && o.Arch != "aarch64" {
		return fmt.Errorf("LabOptions.Arch %q: want x86_64 or aarch64", o.Arch)
	}
	if o.Boot == "" {
		o.Boot = "bios"
	}
	if o.Boot != "bios" && o.Boot != "uefi" {
		return fmt.Errorf("LabOptions.Boot %q: want bios or uefi", o.Boot)
	}
	if len(o.Disks) == 0 {
		o.Disks = []DiskSpec{{SizeGiB: 5, Serial: "E2EDISK0"}}
	}
	for i, d := range o.Disks {
		if d.SizeGiB <= 0 {
			return fmt.Errorf("disk %d: SizeGiB %d", i, d.SizeGiB)
		}
		if d.Serial == "" || len(d.Serial) > 20 || strings.ContainsAny(d.Serial, " ,='\"") {
			return fmt.Errorf("disk %d: serial %q: 1-20 characters without spaces, commas, quotes or =", i, d.Serial)
		}
	}
	if o.BMCOnBridge && o.IPv6Only {
		return fmt.Errorf("BMCOnBridge needs the bridge's IPv4 address")
	}
	if o.BMCOnBridge && o.InbandBMC {
		return fmt.Errorf("BMCOnBridge and InbandBMC: the BMC has one LAN address")
	}
	if o.MemMB == 0 {
		o.MemMB = 1024
	}
	if o.CPUs == 0 {
		o.CPUs = 1
	}
	if o.NICs == 0 {
		o.NICs = 1
	}
	if o.NICs < 1 || o.NICs > 16 {
		return fmt.Errorf("NICs %d: want 1-16", o.NICs)
	}
	return nil
}

// Lab is one isolated bare-metal lab: namespace, bridge, taps, BMC, VM
// definition and serial console. NewLab registers its teardown with
// t.Cleanup; everything it (or StartDaemon) started is stopped by PID and
// the namespace is deleted, also when the test fails.
type Lab struct {
	Opts   LabOptions
	NS     *netns
	Dir    string   // run directory: env file, disks, logs, pidfile
	MACs   []string // one per NIC, MACs[0] is the boot NIC
	Taps   []string
	UUID   string // SMBIOS system UUID
	Serial string // SMBIOS system serial
	VMName string // qemu -name and process name (unique per lab)

	t             testing.TB
	envPath       string
	chassisScript string
	bootdevPath   string
	pidPath       string
	eventsPath    string
	consolePath   string
	disks         []string
	// attached lists the disks the VM gets (indexes into disks); nil: all
	// (UseDisks)
	attached []int

	bmc     *daemon
	console *consoleLogger
	sol     *solRelay

	mu      sync.Mutex
	daemons []*labDaemon // started with StartDaemon, stopped first, newest first
	once    sync.Once
}

type labDaemon struct {
	*daemon
	log string
}

// NewLab builds a lab and registers its teardown.
func NewLab(t testing.TB, opts LabOptions) *Lab {
	t.Helper()
	tools := []string{}
	switch {
	case opts.Arch == "aarch64":
		tools = append(tools, "qemu-system-aarch64", aavmfCode, aavmfVars)
	case opts.Boot == "uefi":
		tools = append(tools, ovmfCode, ovmfVars)
	default:
		tools = append(tools, ipxeQemuROM)
	}
	requireLab(t, tools...)
	if err := opts.defaults(); err != nil {
		t.Fatalf("NewLab: %v", err)
	}
	chassisScript := testdataPath(t, "bmc-chassis.sh")
	// Short directory: the console's unix socket path must stay < 108 bytes.
	dir, err := os.MkdirTemp("", "e2e-")
	if err != nil {
		t.Fatal(err)
	}
	suffix := randHex(4)
	l := &Lab{
		Opts:          opts,
		Dir:           dir,
		UUID:          randUUID(),
		Serial:        "E2E-" + strings.ToUpper(suffix),
		VMName:        "e2evm-" + suffix,
		t:             t,
		envPath:       filepath.Join(dir, "lab.env"),
		chassisScript: chassisScript,
		bootdevPath:   filepath.Join(dir, "bmc-bootdev"),
		pidPath:       filepath.Join(dir, "vm.pid"),
		eventsPath:    filepath.Join(dir, "vm-events.log"),
		consolePath:   filepath.Join(dir, "console.log"),
	}
	base := randMAC()
	for i := range opts.NICs {
		mac := append(net.HardwareAddr(nil), base...)
		mac[5] += byte(i)
		l.MACs = append(l.MACs, mac.String())
		l.Taps = append(l.Taps, "tap"+strconv.Itoa(i))
	}
	registerLab(l)
	t.Cleanup(l.teardown)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := l.setup(ctx); err != nil {
		t.Fatalf("NewLab: %v", err)
	}
	t.Logf("lab: netns %s, %s %s (%s), VM %s (%s, %d MiB, %d CPU, MACs %v), BMC %s:%d in the namespace, dir %s",
		l.NS.Name, Bridge, l.ServerAddr(), l.netName(), l.VMName, opts.Boot, opts.MemMB, opts.CPUs, l.MACs,
		l.BMCAddr(), BMCPort, dir)
	return l
}

func (l *Lab) setup(ctx context.Context) error {
	ns, err := newNetns(ctx)
	if err != nil {
		return err
	}
	l.NS = ns
	for i, d := range l.Opts.Disks {
		p := filepath.Join(l.Dir, fmt.Sprintf("disk%d.raw", i))
		if err := sparseFile(p, int64(d.SizeGiB)<<30); err != nil {
			return err
		}
		l.disks = append(l.disks, p)
	}
	if err := os.WriteFile(l.bootdevPath, []byte("default\n"), 0o644); err != nil {
		return err
	}
	if err := l.writeEnv(); err != nil {
		return err
	}
	if l.console, err = startConsole(filepath.Join(l.Dir, "console.sock"), l.consolePath); err != nil {
		return err
	}

	cmds := []string{
		"link set lo up",
		fmt.Sprintf("link add %s type bridge stp_state 0 forward_delay 0", Bridge),
	}
	if l.Opts.IPv6Only {
		// nodad: usable at once (lab IPV6.md), castiron binds to it.
		cmds = append(cmds, fmt.Sprintf("addr add %s/64 dev %s nodad", ServerIP6, Bridge))
	} else {
		cmds = append(cmds, fmt.Sprintf("addr add %s/%d dev %s", ServerIP, labPrefix, Bridge))
	}
	if l.Opts.InbandBMC {
		cmds = append(cmds, "addr add "+BMCInbandAddress+"/32 dev lo")
	}
	for _, tap := range l.Taps {
		// persistent: every power-on reattaches to the same bridge port
		cmds = append(cmds, "tuntap add dev "+tap+" mode tap",
			"link set "+tap+" master "+Bridge, "link set "+tap+" up")
	}
	if err := ns.IPBatch(ctx, cmds...); err != nil {
		return err
	}
	// link-local usable at once (gotcha 16), before the bridge goes up
	if _, err := ns.Run(ctx, "sysctl", "-qw", "net.ipv6.conf."+Bridge+".accept_dad=0"); err != nil {
		return err
	}
	if err := ns.IPBatch(ctx, "link set "+Bridge+" up"); err != nil {
		return err
	}
	if l.Opts.SOL {
		if err := l.startSOLRelay(); err != nil {
			return err
		}
	}
	return l.startBMC(ctx)
}

// writeEnv writes the settings testdata/bmc-chassis.sh and vm.sh read.
func (l *Lab) writeEnv() error {
	var nics, disks []string
	for i, tap := range l.Taps {
		nics = append(nics, tap+"="+l.MACs[i])
	}
	for i, p := range l.disks {
		if l.attached == nil || slices.Contains(l.attached, i) {
			disks = append(disks, p+"="+l.Opts.Disks[i].Serial)
		}
	}
	vmScript := filepath.Join(filepath.Dir(l.chassisScript), "vm.sh")
	vars := [][2]string{
		{"E2E_NS", l.NS.Name},
		{"E2E_RUN", l.Dir},
		{"E2E_VM_NAME", l.VMName},
		{"E2E_VM_SCRIPT", vmScript},
		{"E2E_QEMU", l.machine().qemu},
		{"E2E_MACHINE", l.machine().machine},
		{"E2E_CPU", l.machine().cpu},
		{"E2E_ACCEL", "tcg"}, // KVM here is nested PVM and unusably slow (NOTES.md)
		{"E2E_BOOT", l.Opts.Boot},
		{"E2E_NET", l.netName()},
		{"E2E_MEM", strconv.Itoa(l.Opts.MemMB)},
		{"E2E_CPUS", strconv.Itoa(l.Opts.CPUs)},
		{"E2E_UUID", l.UUID},
		{"E2E_SERIAL", l.Serial},
		{"E2E_NICS", strings.Join(nics, " ")},
		{"E2E_DISKS", strings.Join(disks, " ")},
		{"E2E_OVMF_CODE", l.machine().code},
		{"E2E_OVMF_VARS", l.machine().vars},
		{"E2E_CONSOLE_SOCK", filepath.Join(l.Dir, "console.sock")},
		{"E2E_MONITOR_PORT", strconv.Itoa(monitorPort)},
		{"E2E_PIDFILE", l.pidPath},
		{"E2E_BOOTDEV_FILE", l.bootdevPath},
		{"E2E_EVENTS", l.eventsPath},
		{"E2E_LAUNCH_LOG", filepath.Join(l.Dir, "vm-launch.log")},
		{"E2E_INBAND_BMC", strconv.FormatBool(l.Opts.InbandBMC)},
		{"E2E_BMC_ADDR", l.BMCAddr()},
		{"E2E_BMC_VM_PORT", strconv.Itoa(bmcVMPort)},
	}
	var b strings.Builder
	b.WriteString("# written by tests/e2e (lab_test.go); read by testdata/bmc-chassis.sh and vm.sh\n")
	for _, kv := range vars {
		fmt.Fprintf(&b, "export %s=%s\n", kv[0], shellQuote(kv[1]))
	}
	return os.WriteFile(l.envPath, []byte(b.String()), 0o644)
}

// machineSpec is how qemu runs the lab's VM (UEFI: a code and a vars pflash).
type machineSpec struct{ qemu, machine, cpu, code, vars string }

func (l *Lab) machine() machineSpec {
	if l.Opts.Arch == "aarch64" {
		return machineSpec{"qemu-system-aarch64", "virt", "cortex-a57", aavmfCode, aavmfVars}
	}
	return machineSpec{"qemu-system-x86_64", "pc", "", ovmfCode, ovmfVars}
}

// netName is "ipv6" for an IPv6-only lab, else "ipv4".
func (l *Lab) netName() string {
	if l.Opts.IPv6Only {
		return "ipv6"
	}
	return "ipv4"
}

// ServerAddr is castiron's address on the bridge, as it goes in a URL.
func (l *Lab) ServerAddr() string {
	if l.Opts.IPv6Only {
		return "[" + ServerIP6 + "]"
	}
	return ServerIP
}

// StartDaemon starts a long-running program inside the namespace (castiron,
// tcpdump, ...); its output goes to <Dir>/<name>.log. Teardown stops it by
// PID before the VM and the BMC.
func (l *Lab) StartDaemon(name string, args ...string) (*daemon, error) {
	return l.StartDaemonIn(l.NS, name, args...)
}

// StartDaemonIn is StartDaemon inside another namespace of the lab's (one
// attached to its bridge).
func (l *Lab) StartDaemonIn(ns *netns, name string, args ...string) (*daemon, error) {
	log := filepath.Join(l.Dir, name+".log")
	d, err := startDaemon(name, ns.Command(context.Background(), args[0], args[1:]...), log)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.daemons = append(l.daemons, &labDaemon{daemon: d, log: log})
	l.mu.Unlock()
	return d, nil
}

// HTTPClient reaches servers inside the namespace (see nsDialer).
func (l *Lab) HTTPClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			Proxy:               nil, // never a proxy: the lab has no way out
			DialContext:         nsDialer(l.NS.Path()),
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     30 * time.Second,
		},
	}
}

// --- the VM, seen from outside ---

// QEMUPID is the running VM's qemu PID, or 0 when the VM is off.
func (l *Lab) QEMUPID() int {
	b, err := os.ReadFile(l.pidPath)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || !procAlive(pid) || !strings.Contains(procCmdline(pid), l.VMName) {
		return 0
	}
	return pid
}

// WaitQEMU polls until the VM runs (on=true) or is gone (on=false).
func (l *Lab) WaitQEMU(ctx context.Context, on bool) error {
	for {
		if (l.QEMUPID() != 0) == on {
			return nil
		}
		select {
		case <-ctx.Done():
			state := "running"
			if !on {
				state = "gone"
			}
			return fmt.Errorf("qemu %s not %s: %w", l.VMName, state, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ConsoleLog is the path of the stamped serial-console log.
func (l *Lab) ConsoleLog() string { return l.consolePath }

// Console parses the serial-console log so far.
func (l *Lab) Console() []ConsoleLine {
	lines, err := readConsoleLog(l.consolePath)
	if err != nil {
		l.t.Logf("read console log: %v", err)
	}
	return lines
}

// VMEvents are the chassis program's power events ("start bootdev=pxe ...",
// "stop (bmc power off)", "bmc set power=1"), stamped.
func (l *Lab) VMEvents() []ConsoleLine {
	b, _ := os.ReadFile(l.eventsPath)
	var out []ConsoleLine
	for _, line := range strings.Split(string(b), "\n") {
		ts, text, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		at, err := parseEpoch(ts)
		if err != nil {
			continue
		}
		out = append(out, ConsoleLine{At: at, Text: text})
	}
	return out
}

// DiskPath is the raw image file of disk i (for checks after a deploy).
func (l *Lab) DiskPath(i int) string { return l.disks[i] }

// UseDisks attaches only the disks of these indexes at the VM's next
// start (a disk pulled out of the machine); no index: all of them again.
func (l *Lab) UseDisks(idx ...int) error {
	l.attached = nil
	if len(idx) > 0 {
		l.attached = slices.Clone(idx)
	}
	return l.writeEnv()
}

// --- teardown ---

// teardown stops everything by PID (newest daemons first, then the VM, the
// BMC, the console), deletes the namespace and the run directory. It runs
// once, from t.Cleanup or the interrupt handler.
func (l *Lab) teardown() {
	l.once.Do(func() {
		unregisterLab(l)
		failed := l.t.Failed()
		if failed {
			l.dumpLogs()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		l.mu.Lock()
		daemons := l.daemons
		l.mu.Unlock()
		var errs []error
		for i := len(daemons) - 1; i >= 0; i-- {
			if err := daemons[i].stop(10 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if pid := l.QEMUPID(); pid != 0 {
			if err := stopPID(pid, l.VMName, 5*time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if l.bmc != nil {
			if err := l.bmc.stop(3 * time.Second); err != nil {
				errs = append(errs, err)
			}
		}
		if l.sol != nil {
			l.sol.Close()
		}
		if l.console != nil {
			_ = l.console.Close()
		}
		if l.NS != nil {
			if err := l.NS.Delete(ctx, append(l.Taps, Bridge)...); err != nil {
				errs = append(errs, err)
			}
		}
		if keep := os.Getenv("E2E_KEEP"); keep == "always" || (failed && keep == "1") {
			l.t.Logf("E2E_KEEP=%s: run directory kept: %s", keep, l.Dir)
		} else if err := os.RemoveAll(l.Dir); err != nil {
			errs = append(errs, err)
		}
		if err := errors.Join(errs...); err != nil {
			l.t.Errorf("lab teardown: %v", err)
		}
	})
}

// dumpLogs puts the tails of the serial console, the BMC/VM events and every
// daemon's log (castiron's) into the test output.
func (l *Lab) dumpLogs() {
	l.t.Logf("---- serial console (last 60 lines) %s ----\n%s", l.consolePath, tailFile(l.consolePath, 60))
	l.t.Logf("---- BMC/VM events ----\n%s", tailFile(l.eventsPath, 30))
	for _, f := range []string{"vm-launch.log", "ipmi_sim.log"} {
		if s := tailFile(filepath.Join(l.Dir, f), 20); s != "" {
			l.t.Logf("---- %s ----\n%s", f, s)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, d := range l.daemons {
		l.t.Logf("---- %s log (last 80 lines) %s ----\n%s", d.name, d.log, tailFile(d.log, 80))
	}
}

// --- small helpers ---

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

func sparseFile(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x", b)
}

// randMAC is 52:54:00:xx:xx:xx (qemu's locally administered prefix), with
// room in the last byte for further NICs.
func randMAC() net.HardwareAddr {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	b[2] &= 0xf0
	return net.HardwareAddr{0x52, 0x54, 0x00, b[0], b[1], b[2]}
}

func randUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// shellQuote single-quotes s for the env file.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
