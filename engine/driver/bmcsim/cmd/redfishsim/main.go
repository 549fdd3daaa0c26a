// Command redfishsim serves castiron's Redfish BMC emulator
// (engine/driver/bmcsim/redfishsim): state-only BMCs (one, or -count of
// them on consecutive ports for a fleet), or one BMC driving a qemu VM.
//
//	redfishsim -listen 127.0.0.1:8000 -flavour idrac
//	redfishsim -listen 127.0.0.1:8000 -count 100          # ports 8000-8099
//	redfishsim -listen 127.0.0.1:8000 -qemu -qemu-dir /tmp/vm \
//	    -disk /tmp/vm/disk0.raw=DISK0 -nic 52:54:00:12:34:56=tap0 -boot-mode Legacy \
//	    -ssh 127.0.0.1:2200                                # the VM's serial console over SSH
//
// It prints one line per BMC ("redfishsim: <url> system <path>") once every
// BMC listens, and stops (VM included) on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"castiron/engine/driver/bmcsim/redfishsim"
)

type list []string

func (l *list) String() string     { return strings.Join(*l, ",") }
func (l *list) Set(v string) error { *l = append(*l, v); return nil }

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "redfishsim:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		cfg                   redfishsim.Config
		q                     redfishsim.QEMUConfig
		listen, flavour       string
		count                 int
		useQEMU, debug        bool
		disks, nics, macs     list
		taskDelay, latency    time.Duration
		vmedia, bootMode      string
		noSessions, onceCont  bool
		sessionTimeout        time.Duration
		qemuBinary, qemuAccel string
		sshListen             string
	)
	flag.StringVar(&listen, "listen", "127.0.0.1:8000", "address of the (first) BMC")
	flag.IntVar(&count, "count", 1, "state-only BMCs on consecutive ports (fleet)")
	flag.StringVar(&flavour, "flavour", "generic", "generic (DMTF mockup), idrac or ilo")
	flag.StringVar(&cfg.User, "user", "admin", "user name")
	flag.StringVar(&cfg.Password, "password", "password", "password")
	flag.StringVar(&vmedia, "vmedia", "manager", "where virtual media lives: manager, system (sushy-tools) or both")
	flag.BoolVar(&noSessions, "no-sessions", false, "no SessionService: basic auth only (sushy-tools)")
	flag.BoolVar(&onceCont, "once-reads-continuous", false, "store BootSourceOverrideEnabled Once as Continuous (sushy-tools)")
	flag.DurationVar(&sessionTimeout, "session-timeout", 30*time.Minute, "idle session timeout")
	flag.StringVar(&bootMode, "boot-mode", "", "UEFI or Legacy (default: the flavour's)")
	flag.StringVar(&cfg.SystemID, "system-id", "", "ComputerSystem id (default: the flavour's)")
	flag.StringVar(&cfg.UUID, "uuid", "", "system UUID (default: the flavour's; with -count, made unique)")
	flag.Var(&macs, "mac", "a NIC's MAC (repeat; default: the flavour's, or the -nic MACs)")
	flag.DurationVar(&taskDelay, "task-delay", 2*time.Second, "how long update and volume tasks run")
	flag.DurationVar(&latency, "latency", 0, "added to every answer")
	flag.BoolVar(&useQEMU, "qemu", false, "drive a qemu VM (one BMC)")
	flag.StringVar(&q.Dir, "qemu-dir", "", "the VM's run directory (QMP socket, NVRAM, console, qemu.log)")
	flag.StringVar(&q.Name, "name", "redfishsim", "the VM's name")
	flag.StringVar(&qemuBinary, "qemu-binary", "qemu-system-x86_64", "qemu")
	flag.StringVar(&qemuAccel, "accel", "tcg", "qemu accelerator")
	flag.IntVar(&q.MemMB, "mem", 1024, "the VM's memory (MiB)")
	flag.IntVar(&q.CPUs, "cpus", 1, "the VM's CPUs")
	flag.StringVar(&q.Console, "console", "", "serial console file (default: <qemu-dir>/console.log)")
	flag.Var(&disks, "disk", "PATH[=SERIAL] a raw disk of the VM (repeat; PATH.qcow2 is qcow2)")
	flag.Var(&nics, "nic", "MAC[=TAP] a NIC of the VM (repeat; no TAP: qemu's restricted user network)")
	flag.StringVar(&sshListen, "ssh", "", "serve the host serial console over SSH on this address (with -count: consecutive ports)")
	flag.BoolVar(&cfg.SSHConsoleManagerOnly, "ssh-manager-only", false, "advertise the SSH console only in the Manager's SerialConsole (older Redfish)")
	flag.BoolVar(&cfg.ControlAPI, "control", false, "serve the control API under /redfishsim (state, faults, sessions, health)")
	flag.BoolVar(&debug, "debug", false, "log every machine event")
	flag.Parse()

	level := slog.LevelWarn
	if debug {
		level = slog.LevelInfo
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	cfg.Flavour, cfg.VirtualMedia, cfg.BootMode = redfishsim.Flavour(flavour), vmedia, bootMode
	cfg.NoSessionService, cfg.OnceReadsContinuous, cfg.SessionTimeout = noSessions, onceCont, sessionTimeout
	cfg.TaskDelay, cfg.Latency, cfg.Logger, cfg.MACs = taskDelay, latency, log, macs

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	if useQEMU {
		if count != 1 {
			return errors.New("-qemu drives one VM: -count must be 1")
		}
		if q.Dir == "" {
			return errors.New("-qemu needs -qemu-dir")
		}
		q.Binary, q.Accel, q.Logger, q.UUID = qemuBinary, qemuAccel, log, cfg.UUID
		// The BMC reports the VM's own memory, CPUs and disks (raw disks:
		// their file size), so inspection matches what the agent finds.
		cfg.MemoryGiB, cfg.CPUs, cfg.Threads = float64(q.MemMB)/1024, 1, q.CPUs
		for i, d := range disks {
			path, serial, _ := strings.Cut(d, "=")
			f := "raw"
			if strings.HasSuffix(path, ".qcow2") {
				f = "qcow2"
			}
			q.Disks = append(q.Disks, redfishsim.QEMUDisk{Path: path, Serial: serial, Format: f})
			if st, err := os.Stat(path); err == nil && f == "raw" {
				cfg.Drives = append(cfg.Drives, redfishsim.DriveConfig{ID: fmt.Sprintf("Disk%d", i), CapacityBytes: st.Size(),
					MediaType: "HDD", Protocol: "SATA", SerialNumber: serial, Model: "QEMU HARDDISK"})
			}
		}
		for _, n := range nics {
			mac, tap, _ := strings.Cut(n, "=")
			q.NICs = append(q.NICs, redfishsim.QEMUNIC{MAC: mac, Tap: tap})
			if len(macs) == 0 {
				cfg.MACs = append(cfg.MACs, mac)
			}
		}
		m, err := redfishsim.NewQEMU(q)
		if err != nil {
			return err
		}
		cfg.Machine = m
		if q.Dir != "" {
			cfg.MediaDir = q.Dir
		}
	}

	host, portStr, err := net.SplitHostPort(listen)
	if err != nil {
		return err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return err
	}
	var servers []*redfishsim.Server
	var lns, sshLns []net.Listener
	for i := range count {
		c := cfg
		if count > 1 && cfg.UUID != "" {
			c.UUID = fmt.Sprintf("%s%04x", cfg.UUID[:len(cfg.UUID)-4], i)
		} else if count > 1 {
			c.UUID = fmt.Sprintf("52656466-6973-4869-6d00-%012x", i)
		}
		s, err := redfishsim.New(c)
		if err != nil {
			return err
		}
		addr := net.JoinHostPort(host, strconv.Itoa(port+i))
		if port == 0 {
			addr = net.JoinHostPort(host, "0")
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return err
		}
		servers, lns = append(servers, s), append(lns, ln)
		if sshListen != "" {
			sln, err := listenNth(sshListen, i)
			if err != nil {
				return err
			}
			sshLns = append(sshLns, sln)
		}
	}
	var wg sync.WaitGroup
	errc := make(chan error, 2*len(servers))
	for i, s := range servers {
		fmt.Printf("redfishsim: http://%s system %s\n", lns[i].Addr(), s.SystemPath())
		if sshLns != nil {
			fmt.Printf("redfishsim: ssh %s\n", sshLns[i].Addr())
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := s.ServeSSH(ctx, sshLns[i]); err != nil {
					errc <- err
				}
			}()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Serve(ctx, lns[i]); err != nil {
				errc <- err
			}
		}()
	}
	wg.Wait()
	cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.Close(cctx))
	}
	close(errc)
	for err := range errc {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// listenNth listens on addr's port + i (port 0: any).
func listenNth(addr string, i int) (net.Listener, error) {
	host, portStr, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, err
	}
	if port != 0 {
		port += i
	}
	return net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
}
