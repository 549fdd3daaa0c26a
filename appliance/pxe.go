package appliance

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"castiron/engine"
	"castiron/httpapi/health"
	"castiron/pxe/boot"
	"castiron/pxe/dhcp"
	"castiron/pxe/images"
	"castiron/pxe/netboot"
	"castiron/pxe/ra"
	"castiron/pxe/tftp"
	"castiron/storage"
)

// pxeConfig is the provisioning-network part of serve's flags.
type pxeConfig struct {
	iface, dhcpMode, dhcpRange, publicURL string
	dhcp6Mode, dhcp6Range, raMode         string
	bootHTTPPort                          string
	ipxeDir, ramdiskDir, imagesDir        string
	discovery, netbootHTTP                bool
}

// provisioning is the network-boot side of the appliance: DHCP, TFTP, the
// router-advertisement responder, HTTP boot and image serving, and the boot
// timeline they write. Built by newProvisioning, run by run.
type provisioning struct {
	cfg      pxeConfig
	log      *slog.Logger
	store    *storage.SQLite
	gate     gateAdapter
	site     provisioningSite
	recorder *boot.BatchRecorder
	meter    boot.Meter
	dhcp     *dhcp.Server  // IPv4; nil without an IPv4 address
	dhcp6    *dhcp.Server6 // nil without IPv6 or with --dhcp6-mode off
	tftp     []*tftp.Server
	ra       *ra.Responder // nil with --router-advertisements off
	// trustArchive is the CA overlay (nil without TLS), also for GRUB.
	trustArchive func(context.Context) ([]byte, error)
	mounts       map[string]http.Handler
	boot         *netboot.Handler // /boot/; nil without --pxe-interface
	// listeners are the provisioning network's own HTTP listeners: for
	// the agent (site.agentAddrs) and, with TLS, for iPXE (site.bootAddrs).
	listeners []*siteListener
}

// listenerChecks are the readiness checks of the servers this
// configuration runs.
func (p *provisioning) listenerChecks() []health.Check {
	var checks []health.Check
	if p.dhcp != nil {
		checks = append(checks, listenerCheck("dhcp", p.dhcp.Listening))
	}
	if p.dhcp6 != nil {
		checks = append(checks, listenerCheck("dhcp6", p.dhcp6.Listening))
	}
	for _, t := range p.tftp {
		checks = append(checks, listenerCheck("tftp "+t.Addr(), t.Listening))
	}
	if p.ra != nil {
		checks = append(checks, listenerCheck("router advertisements", p.ra.Listening))
	}
	for _, l := range p.listeners {
		checks = append(checks, listenerCheck(l.name+" "+l.addr, l.up.Load))
	}
	return checks
}

// gateAdapter answers pxe's question with engine's decision.
type gateAdapter struct{ cond *engine.Conductor }

func (g gateAdapter) Allow(ctx context.Context, mac net.HardwareAddr) (boot.Decision, bool) {
	d, ok := g.cond.BootTarget(ctx, mac)
	out := boot.Decision{NodeUUID: d.NodeUUID, Purpose: d.Purpose, CPUArch: d.CPUArch}
	if i := d.Instance; i != nil {
		out.Instance = &boot.Instance{ISO: i.ISO, Kernel: i.Kernel, Ramdisk: i.Ramdisk, Args: i.Args}
	}
	return out, ok
}

// AllowNode serves a node's virtual media ISO while engine boots its ramdisk.
func (g gateAdapter) AllowNode(ctx context.Context, nodeUUID string) bool {
	return g.cond.RamdiskBoots(ctx, nodeUUID)
}

// timelineSink writes recorder batches to the store.
func timelineSink(store storage.BootEventStore) func(ctx context.Context, evs []boot.Event) error {
	return func(ctx context.Context, evs []boot.Event) error {
		rows := make([]storage.BootEvent, len(evs))
		for i, e := range evs {
			rows[i] = storage.BootEvent{At: e.At, MAC: e.MAC, NodeUUID: e.NodeUUID, Kind: e.Kind, Detail: e.TookDetail()}
		}
		return store.AddBootEvents(ctx, rows)
	}
}

// dhcpLeases keeps pxe/dhcp's leases in storage; the two lease types have
// the same fields, so each converts to the other.
type dhcpLeases struct{ store storage.LeaseStore }

func (d dhcpLeases) ListLeases(ctx context.Context) ([]dhcp.Lease, error) {
	ls, err := d.store.ListLeases(ctx)
	out := make([]dhcp.Lease, len(ls))
	for i, l := range ls {
		out[i] = dhcp.Lease(l)
	}
	return out, err
}

func (d dhcpLeases) PutLeases(ctx context.Context, ls []dhcp.Lease) ([]error, error) {
	in := make([]storage.Lease, len(ls))
	for i, l := range ls {
		in[i] = storage.Lease(l)
	}
	errs, err := d.store.PutLeases(ctx, in)
	for i, e := range errs {
		var conflict *storage.LeaseConflictError
		if errors.As(e, &conflict) {
			errs[i] = &dhcp.LeaseConflictError{IP: conflict.IP, HeldBy: conflict.HeldBy}
		}
	}
	return errs, err
}

func (d dhcpLeases) DeleteLease(ctx context.Context, mac string) error {
	return d.store.DeleteLease(ctx, mac)
}

// vmediaDir is where the per-node virtual media ISOs are kept.
func vmediaDir(c *serveConfig) string { return filepath.Join(c.dataDir, "vmedia") }

// newProvisioning prepares everything; nothing listens until run.
func newProvisioning(c *serveConfig, site provisioningSite, store *storage.SQLite, cond *engine.Conductor, meter boot.Meter, ts *tlsSource, log *slog.Logger) (*provisioning, error) {
	p := &provisioning{cfg: c.pxe, log: log, store: store, mounts: map[string]http.Handler{}, gate: gateAdapter{cond}, site: site, meter: meter}
	p.recorder = boot.NewBatchRecorder(timelineSink(store), log)
	p.mounts["/images/"] = images.Handler(c.pxe.imagesDir, log)
	// Virtual media ISOs need no provisioning network, only a URL the BMCs
	// reach (--public-url).
	p.mounts["/boot/vmedia/"] = netboot.NewVMedia(netboot.VMediaConfig{
		Dir: vmediaDir(c), Gate: p.gate, Recorder: p.recorder, Meter: meter, Logger: log,
	})
	p.listeners = siteListeners(site, ts)
	if site.iface == nil {
		if c.pxe.netbootHTTP {
			// No DHCP or TFTP: iPXE scripts by MAC on the API listener,
			// with the URLs the machine used (or --public-url).
			p.boot = netboot.New(netboot.Config{PublicURL: strings.TrimRight(site.publicURL, "/"),
				KernelPath: filepath.Join(c.pxe.ramdiskDir, "vmlinuz"), InitramfsPath: filepath.Join(c.pxe.ramdiskDir, "initramfs"),
				Gate: p.gate, Recorder: p.recorder, Logger: log, Meter: meter})
			p.mounts["/boot/"] = p.boot
		}
		return p, nil
	}
	loaders := map[string]string{}
	for _, name := range tftp.DefaultFiles() {
		loaders[name] = filepath.Join(c.pxe.ipxeDir, name)
	}
	// arm64 boots network GRUB (make ramdisk ARCH=arm64 puts it next to
	// the arm64 kernel), which loads grub/grub.cfg, the kernel and the
	// initramfs from castiron's TFTP.
	arm64Dir := filepath.Join(c.pxe.ramdiskDir, "aarch64")
	grub := map[string]string{
		dhcp.DefaultEFIArm64:  filepath.Join(arm64Dir, dhcp.DefaultEFIArm64),
		netboot.GRUBKernel:    filepath.Join(arm64Dir, "vmlinuz"),
		netboot.GRUBInitramfs: filepath.Join(arm64Dir, "initramfs"),
	}
	loaders[dhcp.DefaultEFIArm64] = grub[dhcp.DefaultEFIArm64]
	var trustArchive func(context.Context) ([]byte, error)
	if ts != nil {
		trustArchive = func(ctx context.Context) ([]byte, error) { return caOverlay(ctx, ts) }
	}
	p.trustArchive = trustArchive
	p.boot = netboot.New(netboot.Config{
		URLs:          site.urlsFor,
		Loaders:       loaders,
		TrustArchive:  trustArchive,
		KernelPath:    filepath.Join(c.pxe.ramdiskDir, "vmlinuz"),
		InitramfsPath: filepath.Join(c.pxe.ramdiskDir, "initramfs"),
		Ramdisks: map[string]netboot.Ramdisk{"aarch64": {
			KernelPath: filepath.Join(arm64Dir, "vmlinuz"), InitramfsPath: filepath.Join(arm64Dir, "initramfs")}},
		Gate:     p.gate,
		Recorder: p.recorder,
		Logger:   log,
		Meter:    meter,

		InspectionKernelArgs: strings.Fields(c.inspectKernelArgs),
	})
	p.mounts["/boot/"] = p.boot
	if site.serverIP.IsValid() {
		if err := p.newDHCP4(c); err != nil {
			return nil, err
		}
	}
	if site.serverIP6.IsValid() && c.pxe.dhcp6Mode == "full" {
		if err := p.newDHCP6(c); err != nil {
			return nil, err
		}
	}
	for _, ip := range []netip.Addr{site.serverIP, site.serverIP6} {
		if !ip.IsValid() {
			continue
		}
		t, err := tftp.New(tftp.Config{
			Addr:     net.JoinHostPort(ip.String(), "69"),
			Dir:      c.pxe.ipxeDir,
			Extra:    grub,
			Dynamic:  p.grubConfig(ip),
			Recorder: p.recorder,
			MACForIP: p.macForIP,
			Logger:   log.With("component", "tftp"),
			Meter:    meter,
		})
		if err != nil {
			return nil, fmt.Errorf("tftp: %w", err)
		}
		p.tftp = append(p.tftp, t)
	}
	adv, on := p.advert(c.pxe.raMode)
	if on {
		var err error
		if p.ra, err = ra.New(c.pxe.iface, adv, log.With("component", "ra")); err != nil {
			return nil, fmt.Errorf("router advertisements: %w", err)
		}
	}
	return p, nil
}

// grubConfig answers network GRUB's grub/grub.cfg, asked over TFTP at
// local, with the node's boot (netboot.GRUBConfig): GRUB is castiron's
// arm64 boot loader. With TLS it also answers the CA overlay.
func (p *provisioning) grubConfig(local netip.Addr) func(context.Context, string, net.IP) ([]byte, bool) {
	return func(ctx context.Context, name string, client net.IP) ([]byte, bool) {
		// GRUB names files from the root ("/grub/grub.cfg": its prefix is /grub).
		name = strings.TrimLeft(name, "/")
		if name == netboot.GRUBTrust && p.trustArchive != nil {
			b, err := p.trustArchive(ctx)
			if err != nil {
				p.log.Error("CA bundle overlay for GRUB", "err", err)
				return nil, false
			}
			return b, true
		}
		if name != "grub/grub.cfg" {
			return nil, false
		}
		mac, err := net.ParseMAC(p.macForIP(client))
		if err != nil {
			return nil, false
		}
		return p.boot.GRUBConfig(ctx, mac, local, "aarch64")
	}
}

// scriptURL is the iPXE script URL the DHCP servers hand out, on base.
func scriptURL(base string) func(net.HardwareAddr, string) string {
	return func(mac net.HardwareAddr, arch string) string {
		u := base + "/boot/ipxe?mac=" + mac.String()
		if arch != "" {
			u += "&arch=" + arch
		}
		return u
	}
}

func (p *provisioning) newDHCP4(c *serveConfig) error {
	ip, ipnet := p.site.serverIP, p.site.subnet
	dcfg := dhcp.Config{
		Interface: c.pxe.iface,
		Mode:      dhcp.Mode(c.pxe.dhcpMode),
		ServerIP:  ip,
		Netmask:   ipnet.Mask,
		BootFiles: dhcp.BootFiles{HTTPBootBase: p.site.urls4.Boot + "/boot/", ScriptURL: scriptURL(p.site.urls4.Boot)},
		Meter:     p.meter,
	}
	if dcfg.Mode == dhcp.ModeFull {
		first, last, err := dhcpRange(c.pxe.dhcpRange, ip, ipnet)
		if err != nil {
			return err
		}
		dcfg.RangeStart, dcfg.RangeEnd = first, last
	}
	var err error
	if p.dhcp, err = dhcp.New(dcfg, p.gate, dhcpLeases{p.store}, p.recorder, p.log); err != nil {
		return fmt.Errorf("dhcp: %w", err)
	}
	return nil
}

func (p *provisioning) newDHCP6(c *serveConfig) error {
	first, last, err := dhcp6Range(c.pxe.dhcp6Range, p.site.prefix6)
	if err != nil {
		return err
	}
	p.dhcp6, err = dhcp.New6(dhcp.Config6{
		Interface:  c.pxe.iface,
		ServerAddr: p.site.serverIP6,
		RangeStart: first,
		RangeEnd:   last,
		BootFiles:  dhcp.BootFiles{HTTPBootBase: p.site.urls6.Boot + "/boot/", ScriptURL: scriptURL(p.site.urls6.Boot)},
		Meter:      p.meter,
	}, p.gate, dhcpLeases{p.store.Leases6()}, p.recorder, p.log)
	if err != nil {
		return fmt.Errorf("dhcp6: %w", err)
	}
	return nil
}

// advert is the router advertisement for --router-advertisements: "empty"
// configures nothing (iPXE waits ~13 s for IPv6 autoconfiguration unless an
// RA says there is nothing to configure, lab NOTES gotcha 1); "managed"
// sends hosts to DHCPv6 (M, O) and announces the interface's prefix
// on-link; "auto" is managed when castiron runs DHCPv6, else empty; "off"
// sends nothing (the site's router advertises).
func (p *provisioning) advert(mode string) (ra.Advert, bool) {
	if mode == "auto" {
		mode = "empty"
		if p.dhcp6 != nil {
			mode = "managed"
		}
	}
	switch mode {
	case "off":
		return ra.Advert{}, false
	case "managed":
		if !p.site.prefix6.IsValid() {
			return ra.Advert{Managed: true, Other: true}, true
		}
		return ra.Advert{Managed: true, Other: true, Prefixes: []netip.Prefix{p.site.prefix6}, Autonomous: true}, true
	}
	return ra.Advert{}, true
}

// macForIP names the machine behind a TFTP client address, from the DHCP
// server of its family.
func (p *provisioning) macForIP(ip net.IP) string {
	if ip.To4() != nil {
		if p.dhcp != nil {
			return p.dhcp.MACForIP(ip)
		}
		return ""
	}
	if p.dhcp6 != nil {
		return p.dhcp6.MACForIP(ip)
	}
	return ""
}

// run serves until ctx ends; a server that cannot start is an error at once.
func (p *provisioning) run(ctx context.Context, api http.Handler) error {
	var wg sync.WaitGroup
	errc := make(chan error, 4)
	start := func(name string, fn func(ctx context.Context) error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				errc <- fmt.Errorf("%s: %w", name, err)
			}
		}()
	}
	start("boot timeline", func(ctx context.Context) error { p.recorder.Run(ctx); return nil })
	start("prune", p.prune)
	if p.dhcp != nil {
		start("dhcp", p.dhcp.Run)
	}
	if p.dhcp6 != nil {
		start("dhcp6", p.dhcp6.Run)
	}
	for _, t := range p.tftp {
		start("tftp", t.Run)
	}
	if p.ra != nil {
		start("ra", p.ra.Run)
	}
	if p.site.iface != nil {
		p.log.Info("provisioning network up", "interface", p.cfg.iface, "server", p.site.serverIP, "server6", p.site.serverIP6,
			"dhcp_mode", p.cfg.dhcpMode, "dhcp6", p.dhcp6 != nil, "public_url", p.site.publicURL, "ramdisk_dir", p.cfg.ramdiskDir)
	}
	for _, l := range p.listeners {
		start(l.name, func(ctx context.Context) error { return l.serve(ctx, api, p.log) })
	}
	var err error
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	wg.Wait()
	return err
}

// prune keeps the boot timeline to a week and drops leases expired a day
// ago, hourly.
func (p *provisioning) prune(ctx context.Context) error {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		now := time.Now()
		if _, err := p.store.PruneBootEvents(ctx, now.Add(-7*24*time.Hour)); err != nil && ctx.Err() == nil {
			p.log.Warn("pruning the boot timeline failed", "err", err)
		}
		for _, ls := range []storage.LeaseStore{p.store, p.store.Leases6()} {
			if _, err := ls.PruneLeases(ctx, now.Add(-24*time.Hour)); err != nil && ctx.Err() == nil {
				p.log.Warn("pruning expired leases failed", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
