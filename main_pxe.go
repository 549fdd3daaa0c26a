package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"castiron/engine"
	"castiron/httpapi/health"
	"castiron/pxe/boot"
	"castiron/pxe/dhcp"
	"castiron/pxe/httpboot"
	"castiron/pxe/images"
	"castiron/pxe/ra"
	"castiron/pxe/tftp"
	"castiron/storage"
)

// pxeConfig is the provisioning-network part of serve's flags.
type pxeConfig struct {
	iface, dhcpMode, dhcpRange, publicURL string
	ipxeDir, ramdiskDir, imagesDir        string
	discovery                             bool
}

// provisioning is the network-boot side of the appliance: DHCP, TFTP, the
// router-advertisement responder, HTTP boot and image serving, and the boot
// timeline they write. Built by newProvisioning, run by run.
type provisioning struct {
	cfg       pxeConfig
	log       *slog.Logger
	store     *storage.SQLite
	gate      gateAdapter
	serverIP  netip.Addr
	publicURL string
	recorder  *boot.BatchRecorder
	dhcp      *dhcp.Server
	tftp      *tftp.Server
	ra        *ra.Responder
	mounts    map[string]http.Handler
	// agentAddr, when set, is an extra listener on the provisioning
	// network for the agent-facing endpoints only (the API listens on
	// loopback).
	agentAddr string
	agentUp   atomic.Bool
}

// listenerChecks are the readiness checks of the servers this
// configuration runs.
func (p *provisioning) listenerChecks() []health.Check {
	var checks []health.Check
	if p.dhcp != nil {
		checks = append(checks, listenerCheck("dhcp", p.dhcp.Listening),
			listenerCheck("tftp", p.tftp.Listening), listenerCheck("router advertisements", p.ra.Listening))
	}
	if p.agentAddr != "" {
		checks = append(checks, listenerCheck("agent listener", p.agentUp.Load))
	}
	return checks
}

// gateAdapter answers pxe's question with engine's decision.
type gateAdapter struct{ cond *engine.Conductor }

func (g gateAdapter) Allow(ctx context.Context, mac net.HardwareAddr) (boot.Decision, bool) {
	d, ok := g.cond.BootTarget(ctx, mac)
	return boot.Decision{NodeUUID: d.NodeUUID, Purpose: d.Purpose}, ok
}

// timelineSink writes recorder batches to the store.
func timelineSink(store storage.BootEventStore) func(ctx context.Context, evs []boot.Event) error {
	return func(ctx context.Context, evs []boot.Event) error {
		rows := make([]storage.BootEvent, len(evs))
		for i, e := range evs {
			rows[i] = storage.BootEvent{At: e.At, MAC: e.MAC, NodeUUID: e.NodeUUID, Kind: e.Kind, Detail: e.Detail}
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

// provisioningSite is where the provisioning network is and how booting
// machines reach castiron: worked out from the flags before anything is
// built, since both the conductor and the boot servers need the public URL.
type provisioningSite struct {
	iface     *net.Interface // nil without --pxe-interface
	serverIP  netip.Addr
	subnet    *net.IPNet
	publicURL string
	// agentAddr, when set, is an extra listener on the provisioning network
	// for the agent-facing endpoints only (the API listens elsewhere).
	agentAddr string
}

func siteOf(c *serveConfig) (provisioningSite, error) {
	site := provisioningSite{publicURL: c.pxe.publicURL}
	if c.pxe.iface == "" {
		return site, nil
	}
	ifc, err := net.InterfaceByName(c.pxe.iface)
	if err != nil {
		return site, fmt.Errorf("--pxe-interface %s: %w", c.pxe.iface, err)
	}
	ip, ipnet, err := ifaceIPv4(ifc)
	if err != nil {
		return site, fmt.Errorf("--pxe-interface %s: %w", c.pxe.iface, err)
	}
	site.iface, site.serverIP, site.subnet = ifc, ip, ipnet
	_, apiPort, err := net.SplitHostPort(c.listen)
	if err != nil {
		return site, fmt.Errorf("--listen %q: %w", c.listen, err)
	}
	if site.publicURL == "" {
		site.publicURL = "http://" + net.JoinHostPort(ip.String(), apiPort)
	}
	pub, err := url.Parse(site.publicURL)
	if err != nil || pub.Host == "" {
		return site, fmt.Errorf("--public-url %q: not a URL", site.publicURL)
	}
	if !listenCovers(c.listen, ip) {
		site.agentAddr = net.JoinHostPort(ip.String(), portOf(pub, apiPort))
	}
	return site, nil
}

// newProvisioning prepares everything; nothing listens until run.
func newProvisioning(c *serveConfig, site provisioningSite, store *storage.SQLite, cond *engine.Conductor, meter boot.Meter, log *slog.Logger) (*provisioning, error) {
	p := &provisioning{cfg: c.pxe, log: log, store: store, mounts: map[string]http.Handler{}, gate: gateAdapter{cond},
		serverIP: site.serverIP, publicURL: site.publicURL, agentAddr: site.agentAddr}
	p.recorder = boot.NewBatchRecorder(timelineSink(store), log)
	p.mounts["/images/"] = images.Handler(c.pxe.imagesDir, log)
	if site.iface == nil {
		return p, nil
	}
	ip, ipnet := site.serverIP, site.subnet
	var err error
	gate := p.gate
	p.mounts["/boot/"] = httpboot.New(httpboot.Config{
		PublicURL:     p.publicURL,
		KernelPath:    filepath.Join(c.pxe.ramdiskDir, "vmlinuz"),
		InitramfsPath: filepath.Join(c.pxe.ramdiskDir, "initramfs"),
		Gate:          gate,
		Recorder:      p.recorder,
		Logger:        log,
		Meter:         meter,
	})
	dcfg := dhcp.Config{
		Interface: c.pxe.iface,
		Mode:      dhcp.Mode(c.pxe.dhcpMode),
		ServerIP:  ip,
		Netmask:   ipnet.Mask,
		BootFiles: dhcp.BootFiles{
			HTTPBootBase: p.publicURL + "/boot/",
			ScriptURL: func(mac net.HardwareAddr, _ string) string {
				return p.publicURL + "/boot/ipxe?mac=" + mac.String()
			},
		},
		Meter: meter,
	}
	if dcfg.Mode == dhcp.ModeFull {
		first, last, err := dhcpRange(c.pxe.dhcpRange, ip, ipnet)
		if err != nil {
			return nil, err
		}
		dcfg.RangeStart, dcfg.RangeEnd = first, last
	}
	if p.dhcp, err = dhcp.New(dcfg, gate, dhcpLeases{store}, p.recorder, log); err != nil {
		return nil, fmt.Errorf("dhcp: %w", err)
	}
	if p.tftp, err = tftp.New(tftp.Config{
		Addr:     net.JoinHostPort(ip.String(), "69"),
		Dir:      c.pxe.ipxeDir,
		Recorder: p.recorder,
		MACForIP: p.dhcp.MACForIP,
		Logger:   log.With("component", "tftp"),
		Meter:    meter,
	}); err != nil {
		return nil, fmt.Errorf("tftp: %w", err)
	}
	// iPXE waits ~13 s for IPv6 autoconfiguration unless a router
	// advertisement says there is nothing to configure (lab NOTES gotcha 1).
	if p.ra, err = ra.New(c.pxe.iface, ra.Advert{}, log.With("component", "ra")); err != nil {
		return nil, fmt.Errorf("router advertisements: %w", err)
	}
	return p, nil
}

// run serves until ctx ends; a server that cannot start is an error at once.
func (p *provisioning) run(ctx context.Context, agentHandler http.Handler) error {
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
		start("tftp", p.tftp.Run)
		start("ra", p.ra.Run)
		p.log.Info("provisioning network up", "interface", p.cfg.iface, "server", p.serverIP.String(),
			"dhcp_mode", p.cfg.dhcpMode, "public_url", p.publicURL, "ramdisk_dir", p.cfg.ramdiskDir)
	}
	if p.agentAddr != "" {
		srv := &http.Server{Handler: agentHandler, ReadHeaderTimeout: 10 * time.Second}
		start("agent listener", func(ctx context.Context) error {
			ln, err := net.Listen("tcp", p.agentAddr)
			if err != nil {
				return err
			}
			go func() { <-ctx.Done(); _ = srv.Close() }()
			p.log.Info("agent endpoints listening on the provisioning network", "addr", p.agentAddr)
			p.agentUp.Store(true)
			defer p.agentUp.Store(false)
			if err := srv.Serve(ln); err != http.ErrServerClosed {
				return err
			}
			return nil
		})
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
		if _, err := p.store.PruneLeases(ctx, now.Add(-24*time.Hour)); err != nil && ctx.Err() == nil {
			p.log.Warn("pruning expired leases failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// agentOnly exposes the endpoints a booting machine needs and nothing else
// (the operator API stays on --listen).
func agentOnly(api http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p := r.URL.Path
		switch {
		case p == "/v1" || p == "/v1/" || p == "/v1/lookup" || p == "/v1/continue_inspection" ||
			strings.HasPrefix(p, "/v1/heartbeat/") || strings.HasPrefix(p, "/boot/") || strings.HasPrefix(p, "/images/"):
			api.ServeHTTP(w, r)
		default:
			http.NotFound(w, r)
		}
	})
}

func ifaceIPv4(ifc *net.Interface) (netip.Addr, *net.IPNet, error) {
	addrs, err := ifc.Addrs()
	if err != nil {
		return netip.Addr{}, nil, err
	}
	for _, a := range addrs {
		if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil {
			ip, _ := netip.AddrFromSlice(n.IP.To4())
			return ip, n, nil
		}
	}
	return netip.Addr{}, nil, fmt.Errorf("no IPv4 address on the interface")
}

// dhcpRange parses FIRST,LAST, or picks the upper half of the subnet.
func dhcpRange(spec string, server netip.Addr, n *net.IPNet) (netip.Addr, netip.Addr, error) {
	if spec != "" {
		a, b, ok := strings.Cut(spec, ",")
		first, err1 := netip.ParseAddr(strings.TrimSpace(a))
		last, err2 := netip.ParseAddr(strings.TrimSpace(b))
		if !ok || err1 != nil || err2 != nil || !first.Is4() || !last.Is4() || last.Less(first) {
			return netip.Addr{}, netip.Addr{}, fmt.Errorf("--dhcp-range %q: want FIRST,LAST IPv4 addresses", spec)
		}
		return first, last, nil
	}
	ones, bits := n.Mask.Size()
	if bits != 32 || ones > 29 {
		return netip.Addr{}, netip.Addr{}, fmt.Errorf("--dhcp-range is required for a /%d network", ones)
	}
	base := binary.BigEndian.Uint32(n.IP.To4().Mask(n.Mask))
	size := uint32(1) << (32 - ones)
	first, last := base+size/2, base+size-2
	s := binary.BigEndian.Uint32(server.AsSlice())
	if s >= first && s <= last {
		first = s + 1 // keep our own address out of the pool
	}
	return u32Addr(first), u32Addr(last), nil
}

func u32Addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}

// listenCovers reports whether the API listener already accepts connections
// on ip.
func listenCovers(listen string, ip netip.Addr) bool {
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		return false
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a == ip
}

func portOf(u *url.URL, def string) string {
	if p := u.Port(); p != "" {
		return p
	}
	return def
}
