// Command agent is castiron's ramdisk agent: the /init of the initramfs a
// machine PXE-boots for inspection, cleaning and deployment. As PID 1 it
// mounts the kernel file systems, loads the NIC and disk drivers, gets an
// address by DHCP, collects the hardware inventory, then pulls its work from
// castiron (runloop) until told to power off or reboot.
//
// Run under an ordinary OS (not PID 1) it skips the init duties, does not
// touch the network unless -dhcp is given, and does not power anything off.
package main

import (
	"context"
	"errors"
	"flag"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"castiron/ramdisk/agent/apiclient"
	"castiron/ramdisk/agent/inventory"
	"castiron/ramdisk/agent/netup"
	"castiron/ramdisk/agent/runloop"
	"castiron/ramdisk/agent/steps"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/trust"
)

// version is set at build time: -ldflags '-X main.version=1.2.3'.
var version = "dev"

const (
	modulesOrder = "/etc/modules.order"
	modulesDir   = "/lib/modules"
	// zombieGrace: see reapOrphans.
	zombieGrace = 2 * time.Second
	// fatalDelay keeps a fatal error on the console a moment before the
	// machine powers off.
	fatalDelay = 10 * time.Second
)

// options are the command-line flags of a run under an OS. As PID 1 the
// kernel's leftover parameters arrive as arguments, so flags are not parsed.
type options struct {
	cmdline     string
	caPath      string
	root        inventory.Root
	dhcp        bool
	networkData string
}

func parseFlags(pid1 bool) options {
	o := options{cmdline: "/proc/cmdline", caPath: trust.AgentCAPath, root: inventory.DefaultRoot(), networkData: "/" + protocol.NetworkDataFile}
	if pid1 {
		return o
	}
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	fs.StringVar(&o.cmdline, "cmdline", o.cmdline, "file holding the kernel command line")
	fs.StringVar(&o.caPath, "ca", o.caPath, "castiron's CA bundle: when the file exists, HTTPS only")
	fs.StringVar(&o.root.Sys, "sys", o.root.Sys, "sysfs mount point")
	fs.StringVar(&o.root.Proc, "proc", o.root.Proc, "procfs mount point")
	fs.StringVar(&o.root.Dev, "dev", o.root.Dev, "devtmpfs mount point")
	fs.BoolVar(&o.dhcp, "dhcp", false, "bring up the network: from -network-data when that file exists, else the boot NIC by DHCP (always done as PID 1)")
	fs.StringVar(&o.networkData, "network-data", o.networkData, "OpenStack network_data.json to configure instead of DHCP, when it exists")
	fs.Parse(os.Args[1:])
	return o
}

func main() {
	pid1 := os.Getpid() == 1
	var mountErrs []error
	if pid1 {
		mountErrs = mountEarly()
		attachConsole()
	}
	opts := parseFlags(pid1)

	level := new(slog.LevelVar)
	log := slog.New(newConsoleHandler(os.Stdout, level, "castiron-agent"))
	m := machine{pid1: pid1, log: log}
	log.Info("starting", "version", version, "pid1", pid1)
	for _, err := range mountErrs {
		log.Error("early mount failed", "err", err)
	}

	ctx, stop := context.Background(), func() {}
	if !pid1 {
		ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	}
	err := run(ctx, pid1, opts, level, log, m)
	stop()
	if err == nil || (!pid1 && errors.Is(err, context.Canceled)) {
		if !pid1 {
			return
		}
		err = errors.New("run loop ended without powering off")
	}
	log.Error("fatal", "err", err)
	if !pid1 {
		os.Exit(1)
	}
	// PID 1 must not exit (the kernel would panic): power off, else halt.
	time.Sleep(fatalDelay)
	if err := m.PowerOff(); err != nil {
		log.Error("power off failed; halting", "err", err)
	}
	select {}
}

// netUp configures the boot NIC for the family of castiron's address: IPv6
// (DHCPv6 or SLAAC) when the API URL names an IPv6 address, else DHCPv4.
// The lease is kept renewed by a goroutine wg waits for.
func netUp(ctx context.Context, wg *sync.WaitGroup, pid1 bool, cfg netup.Config, log *slog.Logger) error {
	if cfg.Server.Is6() {
		lease, err := netup.Up6(ctx, cfg)
		if err != nil {
			return err
		}
		wg.Go(func() { netup.KeepRenewed6(ctx, cfg, lease) })
		return nil
	}
	lease, err := netup.Up(ctx, cfg)
	if err != nil {
		return err
	}
	if pid1 && lease.Hostname != "" {
		if err := unix.Sethostname([]byte(lease.Hostname)); err != nil {
			log.Warn("sethostname failed", "err", err)
		}
	}
	wg.Go(func() { netup.KeepRenewed(ctx, cfg, lease) })
	return nil
}

// run does the agent's work; it returns after the machine was told to power
// off or reboot (which, as PID 1, does not return) or on a fatal error.
func run(ctx context.Context, pid1 bool, opts options, level *slog.LevelVar, log *slog.Logger, m machine) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	if pid1 || opts.dhcp {
		// DHCP needs the random pool; seeding it takes a while under
		// emulation, so it overlaps the module loading. It cannot be
		// canceled but ends by itself.
		wg.Go(func() { netup.SeedRandom(log) })
	}

	p, err := readCmdline(opts.cmdline)
	if err != nil {
		return err
	}
	if p.Debug {
		level.Set(slog.LevelDebug)
	}
	log.Info("kernel command line", "api", p.APIURL, "inspection", p.InspectionURL, "bootif", p.BootIF, "node", p.NodeUUID)
	if p.APIURL == "" && p.InspectionURL == "" {
		return runloop.ErrNoAPI
	}
	// A CA in the ramdisk means castiron is reached over HTTPS only; check
	// the URLs before touching the network.
	tlsCfg, err := trust.LoadAgentConfig(opts.caPath)
	if err != nil {
		return err
	}
	if p.BootIF != "" && p.BootMAC == nil {
		log.Warn("BOOTIF malformed, using the first NIC with carrier", "bootif", p.BootIF)
	}

	if pid1 {
		wg.Go(func() { reapOrphans(ctx, "/proc", zombieGrace) })
		if hotplug := loadModules(ctx, log, opts.root.Sys, modulesOrder, modulesDir); hotplug != nil {
			wg.Go(func() { hotplug(ctx) })
		}
		mountEFIVars(log)
	}
	if pid1 || opts.dhcp {
		netCfg := netup.Config{MAC: p.BootMAC, Log: log, Server: p.serverAddr()}
		if pid1 {
			netCfg.ResolvConf = "/etc/resolv.conf"
		}
		bootMAC, static, err := staticNetwork(ctx, &wg, netCfg, opts.networkData, log)
		if err != nil {
			return err
		}
		if !static {
			if err := netUp(ctx, &wg, pid1, netCfg, log); err != nil {
				return err
			}
		}
		if p.BootMAC == nil && bootMAC != nil {
			p.BootMAC, p.BootIF = bootMAC, "01-"+strings.ReplaceAll(bootMAC.String(), ":", "-")
		}
	}

	root := opts.root
	root.BootMAC = p.BootMAC.String()
	inv, invErr := inventory.Collect(ctx, root)
	if invErr != nil {
		log.Error("inventory incomplete", "err", invErr)
	}
	log.Info("inventory collected", "cpus", inv.CPU.Count, "memory_mb", inv.Memory.PhysicalMB,
		"disks", len(inv.Disks), "nics", len(inv.Interfaces), "boot_mode", inv.Boot.CurrentBootMode)
	if pid1 {
		readBMC(ctx, log, root, inv)
	}
	if p.CollectLLDP {
		collectLLDP(ctx, log, inv, p.LLDPWait)
	}

	agent := "castiron-agent/" + version
	api := apiclient.New(p.APIURL, agent)
	runSteps := steps.Run
	if tlsCfg != nil {
		if err := api.RequireTLS(tlsCfg); err != nil {
			return err
		}
		if p.InspectionURL != "" {
			if err := trust.RequireHTTPS(p.InspectionURL); err != nil {
				return err
			}
		}
		runSteps = steps.RunTrusting(tlsCfg)
		log.Info("TLS: castiron's CA is set; HTTPS only", "ca", opts.caPath)
	}
	return runloop.Run(ctx, runloop.Config{
		API:            api,
		InspectionURL:  p.InspectionURL,
		NodeUUID:       p.NodeUUID,
		BootIF:         p.BootIF,
		Inventory:      inv,
		InventoryError: invErr,
		Steps:          withBMCUserStep(runSteps, root, log),
		Machine:        m,
		Log:            log,
		AgentVersion:   agent,
	})
}

// staticNetwork configures the network from the node's network_data when
// the ISO the machine booted from carried one (no DHCP server needed); it
// reports whether it did, and the MAC of the first NIC of the data (the
// boot interface the agent reports when no BOOTIF was given). DHCP leases
// of ipv4_dhcp networks are kept renewed in wg.
func staticNetwork(ctx context.Context, wg *sync.WaitGroup, cfg netup.Config, path string, log *slog.Logger) (net.HardwareAddr, bool, error) {
	nd, err := netup.ReadNetworkData(path)
	if err != nil || nd == nil {
		return nil, false, err
	}
	log.Info("static network from network_data", "file", path, "links", len(nd.Links), "networks", len(nd.Networks))
	applied, err := netup.Static(ctx, cfg, nd)
	if err != nil {
		return nil, true, err
	}
	log.Info("network configured", "addresses", strings.Join(applied.Addresses, ", "))
	for _, lease := range applied.Leases {
		wg.Go(func() { netup.KeepRenewed(ctx, cfg, lease) })
	}
	return nd.BootMAC(), true, nil
}
