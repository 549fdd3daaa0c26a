package rack

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/bougou/go-ipmi/pkg/types"

	"castiron/engine/driver/bmcsim/ipmisim"
	"castiron/engine/driver/bmcsim/redfishsim"
	"castiron/ramdisk/agentsim"
)

// Boot devices a machine starts from.
const (
	bootNetwork = "network"
	bootDisk    = "disk"
	bootDefault = "default" // no override: disk when it holds an OS, else network
)

// Machine states (State).
const (
	StateOff      = "off"
	StateFirmware = "firmware" // POST, then the boot device
	StateRamdisk  = "ramdisk"  // castiron's agent runs
	StateOS       = "os"       // booted from disk
	StateNoBoot   = "no boot device"
)

// Machine is one simulated server: a BMC (IPMI or Redfish) in front, NICs
// with MACs, disks, a serial console, and castiron's agent when it
// network-boots castiron's ramdisk.
type Machine struct {
	Index    int
	Name     string
	Protocol string // "ipmi" or "redfish"
	MACs     []string
	Hardware *agentsim.Hardware
	Disks    *agentsim.Disks
	Console  *Console

	rack    *Rack
	ipmi    *ipmisim.BMC
	redfish *redfishsim.Server
	rfURL   string
	log     *slog.Logger

	mu       sync.Mutex
	running  bool
	state    string
	gen      int
	cancel   context.CancelFunc
	done     chan struct{} // closed when the current run has ended
	rfBoot   func() redfishsim.Boot
	boots    int
	agentRun int
}

// DriverInfo is the node's driver and driver_info for castiron.
func (m *Machine) DriverInfo() (string, map[string]any) {
	if m.Protocol == "redfish" {
		return "redfish", map[string]any{
			"redfish_address": m.rfURL, "redfish_system_id": m.redfish.SystemPath(),
			"redfish_username": m.redfish.User(), "redfish_password": m.redfish.Password(),
		}
	}
	return "ipmi", map[string]any{
		"ipmi_address": m.ipmi.Host(), "ipmi_port": m.ipmi.Port(),
		"ipmi_username": ipmisim.DefaultUser, "ipmi_password": ipmisim.DefaultPassword,
	}
}

// IPMI is the machine's IPMI BMC (nil for a Redfish machine).
func (m *Machine) IPMI() *ipmisim.BMC { return m.ipmi }

// Redfish is the machine's Redfish BMC (nil for an IPMI machine).
func (m *Machine) Redfish() *redfishsim.Server { return m.redfish }

// State is what the machine is doing now.
func (m *Machine) State() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Stats are the machine's boots and agent runs so far.
func (m *Machine) Stats() (boots, agentRuns int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.boots, m.agentRun
}

func (m *Machine) printf(format string, a ...any) {
	fmt.Fprintf(m.Console, format+"\r\n", a...)
}

// powerOn starts the machine from off or restarts it; device is where it
// boots (read from the BMC at this start).
func (m *Machine) powerOn(device func() string) {
	m.mu.Lock()
	if m.rack.ctx.Err() != nil { // the rack is closing
		m.mu.Unlock()
		return
	}
	if m.cancel != nil {
		m.cancel()
	}
	prev := m.done
	m.gen++
	gen := m.gen
	ctx, cancel := context.WithCancel(m.rack.ctx)
	done := make(chan struct{})
	m.running, m.state, m.cancel, m.done = true, StateFirmware, cancel, done
	m.boots++
	m.mu.Unlock()
	m.rack.wg.Add(1)
	go func() {
		defer m.rack.wg.Done()
		defer close(done)
		defer cancel()
		if prev != nil {
			<-prev // the previous run has let go of the machine
		}
		m.run(ctx, gen, device())
	}()
}

// powerOff stops the machine at once (the BMC cut the power).
func (m *Machine) powerOff() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cancel != nil {
		m.cancel()
	}
	m.running, m.state = false, StateOff
}

// selfOff is the running OS or agent powering the machine off (gen is the
// run's, so a late call from an older run changes nothing).
func (m *Machine) selfOff(gen int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen != m.gen || !m.running {
		return false
	}
	m.cancel()
	m.running, m.state = false, StateOff
	return true
}

func (m *Machine) setState(gen int, st string) {
	m.mu.Lock()
	if gen == m.gen && m.running {
		m.state = st
	}
	m.mu.Unlock()
}

// run is one power-on: firmware, then the boot device.
func (m *Machine) run(ctx context.Context, gen int, device string) {
	cfg := m.rack.cfg
	m.printf("")
	m.printf("%s %s BIOS %s", m.Hardware.Manufacturer, m.Hardware.Product, m.Hardware.FirmwareVersion)
	m.printf("Memory: %d GiB, CPUs: %d, boot mode %s", m.Hardware.MemoryMiB>>10, m.Hardware.CPUs, m.Hardware.BootMode)
	if device == bootDefault {
		device = bootNetwork
		if m.Disks.Bootable() {
			device = bootDisk
		}
	}
	m.printf("Booting from %s", device)
	if !sleep(ctx, cfg.BootDelay) {
		return
	}
	if device == bootDisk {
		m.setState(gen, StateOS)
		m.printf("Loading Linux ...")
		m.printf("%s login: ", m.Name)
		<-ctx.Done() // the OS runs until the power goes
		return
	}
	args, err := m.netboot(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		m.printf("iPXE: %v", err)
		if m.Disks.Bootable() {
			m.setState(gen, StateOS)
			m.printf("Booting from disk")
			m.printf("%s login: ", m.Name)
		} else {
			m.setState(gen, StateNoBoot)
			m.printf("No bootable device.")
		}
		<-ctx.Done()
		return
	}
	if !sleep(ctx, cfg.RamdiskDelay) {
		return
	}
	m.setState(gen, StateRamdisk)
	m.mu.Lock()
	m.agentRun++
	m.mu.Unlock()
	log := slog.New(slog.NewTextHandler(m.Console, &slog.HandlerOptions{Level: slog.LevelInfo}))
	err = agentsim.Run(ctx, agentsim.Config{
		Params:       agentsim.ParseArgs(args),
		Hardware:     m.Hardware,
		Disks:        m.Disks,
		Machine:      agentMachine{m: m, gen: gen},
		Log:          log,
		HTTP:         m.rack.http,
		EraseRate:    cfg.EraseRate,
		BMCUser:      m.bmcUser,
		MinHeartbeat: cfg.AgentMinHeartbeat,
	})
	if err != nil && ctx.Err() == nil {
		m.printf("castiron-agent: fatal: %v", err)
		m.log.Warn("agent ended", "machine", m.Name, "err", err)
		m.agentPowerOff(gen)
	}
}

// netboot is iPXE: ask castiron for the boot script of the boot NIC and
// read the kernel command line from it (fetching kernel and initramfs when
// FetchRamdisk is set). The answer is the ramdisk's kernel arguments.
func (m *Machine) netboot(ctx context.Context) ([]string, error) {
	cfg := m.rack.cfg
	mac := m.MACs[0]
	m.printf("iPXE initialising devices... net0: %s using %s", mac, m.Hardware.NICs[0].Name)
	m.printf("Configuring (net0 %s)...... ok", mac)
	url, hc := cfg.BootURL+"/boot/ipxe?mac="+mac, m.rack.http
	if cfg.Netboot != nil {
		var err error
		if url, hc, err = cfg.Netboot(ctx, m); err != nil {
			return nil, err
		}
	}
	m.printf("http://%s... ", strings.TrimPrefix(url, "http://"))
	body, err := m.get(ctx, hc, url, 64<<10)
	if err != nil {
		return nil, err
	}
	var kernel, initrd string
	var args []string
	hexhyp := strings.ReplaceAll(mac, ":", "-")
	for _, line := range strings.Split(string(body), "\n") {
		f := strings.Fields(strings.ReplaceAll(line, "${netX/mac:hexhyp}", hexhyp))
		if len(f) == 0 {
			continue
		}
		switch f[0] {
		case "echo":
			if kernel == "" { // the script's banner, not its retry messages
				m.printf("%s", strings.Join(f[1:], " "))
			}
		case "kernel", "initrd":
			f = f[1:]
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[min(2, len(f)):] // --name NAME
			}
			if len(f) == 0 {
				continue
			}
			if line[0] == 'k' && kernel == "" {
				kernel, args = f[0], stripIPXE(f[1:])
			} else if line[0] == 'i' && initrd == "" {
				initrd = f[0]
			}
		}
	}
	if kernel == "" {
		return nil, errors.New("boot script has no kernel line")
	}
	if cfg.FetchRamdisk {
		for _, u := range []string{kernel, initrd} {
			if u == "" {
				continue
			}
			n, err := m.download(ctx, hc, u)
			if err != nil {
				return nil, err
			}
			m.printf("%s... ok (%d bytes)", u, n)
		}
	}
	m.printf("Linux version 6.1.0-castiron (ramdisk) %s", strings.Join(args, " "))
	return args, nil
}

// stripIPXE drops iPXE's "|| goto failed" tail from kernel arguments.
func stripIPXE(args []string) []string {
	for i, a := range args {
		if a == "||" {
			return args[:i]
		}
	}
	return args
}

func (m *Machine) get(ctx context.Context, hc *http.Client, url string, limit int64) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, limit))
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: HTTP %d: %s", url, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return body, err
}

func (m *Machine) download(ctx context.Context, hc *http.Client, url string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: HTTP %d", url, resp.StatusCode)
	}
	return io.Copy(io.Discard, resp.Body)
}

// agentPowerOff: the agent (or the OS) switched the machine off; the BMC
// sees it off from now on.
func (m *Machine) agentPowerOff(gen int) {
	if !m.selfOff(gen) {
		return
	}
	m.printf("reboot: Power down")
	if m.ipmi != nil {
		m.ipmi.SetPower(false) // the hook finds the machine already off
	}
}

// agentReboot: the agent asked for a reboot; the firmware reads the boot
// settings again.
func (m *Machine) agentReboot(gen int) {
	m.mu.Lock()
	ok := gen == m.gen && m.running
	rf := m.rfBoot
	m.mu.Unlock()
	if !ok {
		return
	}
	m.printf("reboot: Restarting system")
	m.powerOn(m.bootDevice(rf))
}

// bootDevice reads the boot device at a start, from the machine's BMC.
func (m *Machine) bootDevice(rf func() redfishsim.Boot) func() string {
	if m.ipmi != nil {
		return func() string { return ipmiDevice(m.ipmi) }
	}
	return func() string {
		if rf == nil {
			return bootDefault
		}
		switch rf().Target {
		case "Pxe", "UefiHttp":
			return bootNetwork
		case "Hdd":
			return bootDisk
		}
		return bootDefault
	}
}

func ipmiDevice(b *ipmisim.BMC) string {
	f := b.TakeBootFlags()
	if f == nil {
		return bootDefault
	}
	switch f.BootDeviceSelector {
	case types.BootDeviceSelectorForcePXE:
		return bootNetwork
	case types.BootDeviceSelectorForceHardDrive, types.BootDeviceSelectorForceHardDriveSafe:
		return bootDisk
	}
	return bootDefault
}

// bmcUser creates the user on the machine's IPMI BMC, in-band.
func (m *Machine) bmcUser(_ context.Context, name string) (agentsim.BMCCredentials, error) {
	if m.ipmi == nil {
		return agentsim.BMCCredentials{}, errors.New("IPMI system interface: no IPMI device")
	}
	if name == "" {
		return agentsim.BMCCredentials{}, errors.New("argument username is required")
	}
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	pw := hex.EncodeToString(b)
	id, err := m.ipmi.SetUser(name, pw)
	if err != nil {
		return agentsim.BMCCredentials{}, err
	}
	return agentsim.BMCCredentials{Username: name, Password: pw, UserID: int(id), Channel: 1}, nil
}

// agentMachine is runloop.Machine for one agent run.
type agentMachine struct {
	m   *Machine
	gen int
}

func (a agentMachine) PowerOff() error { a.m.agentPowerOff(a.gen); return nil }
func (a agentMachine) Reboot() error   { a.m.agentReboot(a.gen); return nil }

// redfishMachine is what the Redfish BMC drives (redfishsim.Machine).
type redfishMachine struct{ m *Machine }

func (r redfishMachine) Running() bool {
	r.m.mu.Lock()
	defer r.m.mu.Unlock()
	return r.m.running
}

func (r redfishMachine) PowerOn(_ context.Context, boot func() redfishsim.Boot) error {
	r.m.mu.Lock()
	r.m.rfBoot = boot
	r.m.mu.Unlock()
	r.m.powerOn(r.m.bootDevice(boot))
	return nil
}

func (r redfishMachine) PowerOff(context.Context, bool) error { r.m.powerOff(); return nil }

func (r redfishMachine) Restart(ctx context.Context, boot func() redfishsim.Boot) error {
	return r.PowerOn(ctx, boot)
}

func (redfishMachine) NMI(context.Context) error { return nil }

// SetMedia: virtual media boot is not simulated (the ramdisk ISO would
// have to be read); inserting succeeds, booting from it finds nothing.
func (redfishMachine) SetMedia(context.Context, string, string) error { return nil }

func sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
