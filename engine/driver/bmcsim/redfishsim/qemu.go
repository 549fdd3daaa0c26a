package redfishsim

import (
	"context"
	"encoding/json"
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
	"syscall"
	"time"

	"github.com/digitalocean/go-qemu/qmp"
)

// QEMUConfig is the VM a QEMU machine runs: one qemu process per power-on,
// started with the boot order of that boot (bootindex), so a boot override
// is read at every start as a server's firmware does.
type QEMUConfig struct {
	Binary string // ["qemu-system-x86_64"]
	Name   string // -name and the process name ["redfishsim"]
	// Dir holds the QMP socket, the UEFI variable store and qemu's own
	// log; required.
	Dir   string
	MemMB int    // [1024]
	CPUs  int    // [1]
	Accel string // ["tcg"]
	UUID  string // SMBIOS system UUID ["": qemu's]
	Disks []QEMUDisk
	NICs  []QEMUNIC
	// Console is the file the serial console goes to (truncated by every
	// start, as libvirt's is) ["": Dir/console.log].
	Console string
	// OVMFCode and OVMFVars are the UEFI firmware (Debian's 4M build);
	// the variable store is copied fresh at every UEFI start.
	OVMFCode, OVMFVars string
	// OVMFSecureCode and OVMFSecureVars are the firmware of a boot with
	// Secure Boot on: Debian's SMM build, which enforces it, and the
	// variable store with Microsoft's and Red Hat's keys enrolled (what a
	// server ships with: shim, signed by Microsoft, boots; an unsigned
	// loader does not).
	OVMFSecureCode, OVMFSecureVars string
	// ExtraArgs are appended to qemu's command line.
	ExtraArgs []string
	Logger    *slog.Logger
}

// QEMUDisk is one virtio-blk disk.
type QEMUDisk struct {
	Path   string
	Format string // ["raw"]
	Serial string
}

// QEMUNIC is one virtio-net NIC.
type QEMUNIC struct {
	MAC string
	// Tap is the host tap device (script=no); "" gives qemu's user-mode
	// network, restricted (no way out).
	Tap string
	// NoROM leaves the NIC without its iPXE option ROM (no network boot in
	// Legacy mode; a VM that boots nothing stays quiet).
	NoROM bool
}

// QEMU is a Machine that drives a qemu TCG VM through QMP.
type QEMU struct {
	cfg QEMUConfig
	log *slog.Logger

	op sync.Mutex // one power operation at a time

	mu        sync.Mutex
	cmd       *exec.Cmd
	mon       *qmp.SocketMonitor
	exited    chan struct{} // closed when the running process ended
	stopping  bool          // an exit we asked for
	reason    string        // the last SHUTDOWN event's reason
	boot      func() Boot
	media     map[string]string // kind -> image path
	closed    bool
	bootStart Boot // what the running process booted with
	wg        sync.WaitGroup
	starts    int
}

// NewQEMU checks cfg and returns a Machine (the VM is off).
func NewQEMU(cfg QEMUConfig) (*QEMU, error) {
	if cfg.Dir == "" {
		return nil, errors.New("redfishsim: QEMUConfig.Dir is required")
	}
	if cfg.Binary == "" {
		cfg.Binary = "qemu-system-x86_64"
	}
	if cfg.Name == "" {
		cfg.Name = "redfishsim"
	}
	if cfg.MemMB == 0 {
		cfg.MemMB = 1024
	}
	if cfg.CPUs == 0 {
		cfg.CPUs = 1
	}
	if cfg.Accel == "" {
		cfg.Accel = "tcg"
	}
	if cfg.Console == "" {
		cfg.Console = filepath.Join(cfg.Dir, "console.log")
	}
	if cfg.OVMFCode == "" {
		cfg.OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	}
	if cfg.OVMFVars == "" {
		cfg.OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	}
	if cfg.OVMFSecureCode == "" {
		cfg.OVMFSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	}
	if cfg.OVMFSecureVars == "" {
		cfg.OVMFSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if _, err := exec.LookPath(cfg.Binary); err != nil {
		return nil, fmt.Errorf("redfishsim: %w", err)
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, err
	}
	return &QEMU{cfg: cfg, log: cfg.Logger, media: map[string]string{}}, nil
}

// Running reports whether the qemu process runs.
func (q *QEMU) Running() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.cmd != nil
}

// PID is the running qemu's process id (0: off).
func (q *QEMU) PID() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.cmd == nil {
		return 0
	}
	return q.cmd.Process.Pid
}

// LastBoot is what the running (or last) process booted with, and how
// many times a process was started.
func (q *QEMU) LastBoot() (Boot, int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.bootStart, q.starts
}

// Console is the serial console file.
func (q *QEMU) Console() string { return q.cfg.Console }

func (q *QEMU) PowerOn(ctx context.Context, boot func() Boot) error {
	q.op.Lock()
	defer q.op.Unlock()
	if q.Running() {
		return nil
	}
	return q.start(ctx, boot)
}

func (q *QEMU) PowerOff(ctx context.Context, force bool) error {
	q.op.Lock()
	defer q.op.Unlock()
	if !force {
		_, err := q.run(ctx, "system_powerdown", nil)
		return err
	}
	return q.stop(ctx)
}

func (q *QEMU) Restart(ctx context.Context, boot func() Boot) error {
	q.op.Lock()
	defer q.op.Unlock()
	if err := q.stop(ctx); err != nil {
		return err
	}
	return q.start(ctx, boot)
}

func (q *QEMU) NMI(ctx context.Context) error {
	_, err := q.run(ctx, "inject-nmi", nil)
	return err
}

// SetMedia changes the CD at once when the VM runs (QMP
// blockdev-change-medium / eject); a USB stick is attached at the next
// start.
func (q *QEMU) SetMedia(ctx context.Context, kind, path string) error {
	q.mu.Lock()
	q.media[kind] = path
	running := q.cmd != nil
	q.mu.Unlock()
	if !running || kind != "cd" {
		return nil
	}
	if path == "" {
		_, err := q.run(ctx, "eject", map[string]any{"id": "cdrom0", "force": true})
		return err
	}
	_, err := q.run(ctx, "blockdev-change-medium", map[string]any{"id": "cdrom0", "filename": path, "format": "raw", "read-only-mode": "read-only"})
	return err
}

// Close stops the VM and waits for the goroutines.
func (q *QEMU) Close(ctx context.Context) error {
	q.op.Lock()
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	err := q.stop(ctx)
	q.op.Unlock()
	q.wg.Wait()
	return err
}

// args is qemu's command line for one boot.
func (q *QEMU) args(b Boot, cd, usb string) ([]string, error) {
	c := q.cfg
	machine := "pc"
	secure := b.Mode == "UEFI" && b.SecureBoot
	switch {
	case secure:
		// The secure build keeps its variables behind SMM: q35 with SMM
		// and the flash locked to it.
		machine = "q35,smm=on"
	case b.Mode == "UEFI":
		machine = "q35"
	}
	args := []string{"-name", c.Name + ",process=" + c.Name, "-machine", machine, "-accel", c.Accel,
		"-m", strconv.Itoa(c.MemMB), "-smp", strconv.Itoa(c.CPUs),
		"-nodefaults", "-display", "none", "-vga", "none", "-no-user-config",
		// The serial port is a socket the BMC's SSH console connects to
		// (DialSerial); everything it prints also goes to the Console file.
		"-chardev", "socket,id=con0,path=" + q.serialPath() + ",server=on,wait=off,logfile=" + c.Console + ",logappend=off",
		"-serial", "chardev:con0",
		"-qmp", "unix:" + q.qmpPath() + ",server=on,wait=off",
		// A guest's own reboot ends the process; the watcher starts it
		// again with the boot settings in force, as firmware reads them.
		"-action", "reboot=shutdown",
		"-boot", "strict=on",
	}
	if c.UUID != "" {
		args = append(args, "-uuid", c.UUID)
	}
	if b.Mode == "UEFI" {
		code, template := c.OVMFCode, c.OVMFVars
		if secure {
			code, template = c.OVMFSecureCode, c.OVMFSecureVars
			args = append(args, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		vars := filepath.Join(c.Dir, "OVMF_VARS.fd")
		raw, err := os.ReadFile(template) // fresh NVRAM: no stale boot entries
		if err != nil {
			return nil, err
		}
		if err := os.WriteFile(vars, raw, 0o644); err != nil {
			return nil, err
		}
		args = append(args, "-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	} else {
		// SeaBIOS mirrors its text console to COM1 (sercon).
		port := filepath.Join(c.Dir, "sercon-port")
		if err := os.WriteFile(port, []byte{0xf8, 0x03}, 0o644); err != nil {
			return nil, err
		}
		args = append(args, "-fw_cfg", "name=etc/sercon-port,file="+port)
	}
	// Boot order: the override's device first, then the machine's own
	// order (disks, network, CD).
	order := []string{"disk", "nic", "cd", "usb"}
	switch b.Target {
	case "Pxe", "UefiHttp":
		order = []string{"nic", "disk", "cd", "usb"}
	case "Cd":
		order = []string{"cd", "disk", "nic", "usb"}
	case "Usb":
		order = []string{"usb", "disk", "nic", "cd"}
	}
	if b.HTTPBootFile != "" {
		// UEFI HTTP boot of an image: OVMF fetches it into a RAM disk and
		// boots that; here the fetched file is a read-only CD that boots
		// first, for this boot only.
		order = append([]string{"httpboot"}, order...)
	}
	idx := map[string]int{}
	n := 1
	for _, k := range order {
		idx[k] = n
		switch k {
		case "disk":
			n += len(c.Disks)
		case "nic":
			n += len(c.NICs)
		default:
			n++
		}
	}
	for i, d := range c.Disks {
		f := d.Format
		if f == "" {
			f = "raw"
		}
		args = append(args, "-drive", fmt.Sprintf("file=%s,if=none,id=disk%d,format=%s,cache=unsafe", d.Path, i, f))
		dev := fmt.Sprintf("virtio-blk-pci,drive=disk%d,bootindex=%d", i, idx["disk"]+i)
		if d.Serial != "" {
			dev += ",serial=" + d.Serial
		}
		args = append(args, "-device", dev)
	}
	for i, nic := range c.NICs {
		if nic.Tap != "" {
			args = append(args, "-netdev", fmt.Sprintf("tap,id=net%d,ifname=%s,script=no,downscript=no", i, nic.Tap))
		} else {
			args = append(args, "-netdev", fmt.Sprintf("user,id=net%d,restrict=on", i))
		}
		dev := fmt.Sprintf("virtio-net-pci,netdev=net%d,mac=%s,bootindex=%d", i, nic.MAC, idx["nic"]+i)
		if nic.NoROM || b.Mode == "UEFI" {
			dev += ",romfile=" // UEFI: OVMF's own network stack
		}
		args = append(args, "-device", dev)
	}
	if b.HTTPBootFile != "" {
		// q35's AHCI ports take one device each: a port of its own (the
		// CD takes the first free one, ide.0/ide.1 after the disks).
		bus := ""
		if strings.HasPrefix(machine, "q35") {
			bus = ",bus=ide.2"
		}
		args = append(args, "-drive", "if=none,id=httpboot0,media=cdrom,readonly=on,format=raw,file="+b.HTTPBootFile,
			"-device", fmt.Sprintf("ide-cd,drive=httpboot0,id=httpboot%s,bootindex=%d", bus, idx["httpboot"]))
	}
	cdDrive := "if=none,id=cd0,media=cdrom,readonly=on"
	if cd != "" {
		cdDrive += ",format=raw,file=" + cd
	}
	args = append(args, "-drive", cdDrive, "-device", fmt.Sprintf("ide-cd,drive=cd0,id=cdrom0,bootindex=%d", idx["cd"]))
	if usb != "" {
		args = append(args, "-device", "qemu-xhci,id=xhci", "-drive", "if=none,id=usb0,format=raw,readonly=on,file="+usb,
			"-device", fmt.Sprintf("usb-storage,bus=xhci.0,drive=usb0,removable=on,bootindex=%d", idx["usb"]))
	}
	return append(args, c.ExtraArgs...), nil
}

func (q *QEMU) qmpPath() string { return filepath.Join(q.cfg.Dir, "qmp.sock") }

func (q *QEMU) serialPath() string { return filepath.Join(q.cfg.Dir, "serial.sock") }

// DialSerial connects to the running VM's serial port (SerialMachine).
// qemu serves one connection at a time.
func (q *QEMU) DialSerial(ctx context.Context) (net.Conn, error) {
	if !q.Running() {
		return nil, errors.New("redfishsim: the machine is off")
	}
	var d net.Dialer
	return d.DialContext(ctx, "unix", q.serialPath())
}

// start runs qemu for one boot (q.op held).
func (q *QEMU) start(ctx context.Context, boot func() Boot) error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return errors.New("redfishsim: the machine is closed")
	}
	cd, usb := q.media["cd"], q.media["usb"]
	q.boot = boot
	q.mu.Unlock()
	b := boot()
	args, err := q.args(b, cd, usb)
	if err != nil {
		return err
	}
	_ = os.Remove(q.qmpPath())
	_ = os.Remove(q.serialPath())
	logf, err := os.OpenFile(filepath.Join(q.cfg.Dir, "qemu.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(q.cfg.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The VM dies with the emulator; it never outlives its owner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("qemu: %w", err)
	}
	logf.Close()
	exited := make(chan struct{})
	q.mu.Lock()
	q.cmd, q.exited, q.stopping, q.reason, q.mon = cmd, exited, false, "", nil
	q.bootStart = b
	q.starts++
	q.mu.Unlock()
	q.log.Info("redfishsim: qemu started", "pid", cmd.Process.Pid, "target", b.Target, "mode", b.Mode, "cd", cd)

	q.wg.Add(1)
	go q.watch(cmd, exited)

	mon, err := q.connect(ctx, exited)
	if err != nil {
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("qemu QMP: %w (see %s)", err, filepath.Join(q.cfg.Dir, "qemu.log"))
	}
	q.mu.Lock()
	q.mon = mon
	q.mu.Unlock()
	return nil
}

// connect dials QMP (the socket appears shortly after qemu starts) and
// follows its events for the SHUTDOWN reason.
func (q *QEMU) connect(ctx context.Context, exited chan struct{}) (*qmp.SocketMonitor, error) {
	for {
		mon, err := qmp.NewSocketMonitor("unix", q.qmpPath(), 5*time.Second)
		if err == nil {
			if err = mon.Connect(); err == nil {
				events, err := mon.Events(context.Background())
				if err != nil {
					return nil, err
				}
				q.wg.Add(1)
				go func() {
					defer q.wg.Done()
					for ev := range events {
						if ev.Event == "SHUTDOWN" {
							r, _ := ev.Data["reason"].(string)
							q.mu.Lock()
							q.reason = r
							q.mu.Unlock()
						}
					}
				}()
				return mon, nil
			}
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-exited:
			return nil, errors.New("qemu exited at start")
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// watch waits for one qemu process; a guest reboot starts it again.
func (q *QEMU) watch(cmd *exec.Cmd, exited chan struct{}) {
	defer q.wg.Done()
	err := cmd.Wait()
	q.mu.Lock()
	if q.mon != nil {
		_ = q.mon.Disconnect()
	}
	reason, stopping, closed, boot := q.reason, q.stopping, q.closed, q.boot
	if q.cmd == cmd {
		q.cmd, q.mon = nil, nil
	}
	q.mu.Unlock()
	close(exited)
	q.log.Info("redfishsim: qemu exited", "pid", cmd.Process.Pid, "reason", reason, "err", err)
	if reason != "guest-reset" || stopping || closed {
		return
	}
	// The guest rebooted: power on again (outside this goroutine's exit,
	// under the operation lock).
	q.wg.Add(1)
	go func() {
		defer q.wg.Done()
		q.op.Lock()
		defer q.op.Unlock()
		q.mu.Lock()
		busy := q.cmd != nil || q.closed
		q.mu.Unlock()
		if busy {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := q.start(ctx, boot); err != nil {
			q.log.Error("redfishsim: restart after a guest reboot", "err", err)
		}
	}()
}

// stop ends the process: QMP quit, then SIGKILL (q.op held).
func (q *QEMU) stop(ctx context.Context) error {
	q.mu.Lock()
	cmd, exited := q.cmd, q.exited
	if cmd == nil {
		q.mu.Unlock()
		return nil
	}
	q.stopping = true
	q.mu.Unlock()
	qctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	_, _ = q.run(qctx, "quit", nil)
	cancel()
	select {
	case <-exited:
		return nil
	case <-time.After(5 * time.Second):
	case <-ctx.Done():
	}
	_ = cmd.Process.Kill()
	select {
	case <-exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("qemu pid %d did not exit after SIGKILL", cmd.Process.Pid)
	}
}

// QMP sends one QMP command to the running VM (tests: query-block).
func (q *QEMU) QMP(ctx context.Context, command string, args map[string]any) (json.RawMessage, error) {
	return q.run(ctx, command, args)
}

// run sends one QMP command and returns its "return" value.
// go-qemu's Run takes no context: it runs in a goroutine and the caller
// stops waiting at ctx's end (the monitor's connection ends with qemu).
func (q *QEMU) run(ctx context.Context, command string, args map[string]any) (json.RawMessage, error) {
	q.mu.Lock()
	mon := q.mon
	q.mu.Unlock()
	if mon == nil {
		return nil, fmt.Errorf("qemu is not running (QMP %s)", command)
	}
	req := map[string]any{"execute": command}
	if args != nil {
		req["arguments"] = args
	}
	raw, _ := json.Marshal(req)
	type result struct {
		out []byte
		err error
	}
	ch := make(chan result, 1)
	go func() {
		out, err := mon.Run(raw)
		ch <- result{out, err}
	}()
	select {
	case <-ctx.Done():
		return nil, fmt.Errorf("QMP %s: %w", command, ctx.Err())
	case r := <-ch:
		if r.err != nil {
			if command == "quit" && strings.Contains(r.err.Error(), "EOF") {
				return nil, nil
			}
			return nil, fmt.Errorf("QMP %s: %w", command, r.err)
		}
		var resp struct {
			Return json.RawMessage `json:"return"`
		}
		_ = json.Unmarshal(r.out, &resp)
		return resp.Return, nil
	}
}
