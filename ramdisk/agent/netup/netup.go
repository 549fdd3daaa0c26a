// Package netup brings up the ramdisk's network: it waits for the boot NIC,
// sets it up, gets an IPv4 lease by DHCP (Up) or an IPv6 address by DHCPv6
// or SLAAC (Up6) and applies it with netlink.
package netup

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4/nclient4"
	"golang.org/x/sys/unix"
)

// Defaults of Config.
const (
	DefaultLinkTimeout = 20 * time.Second
	DefaultVendorClass = "castiron-agent"
)

// Config says which NIC to configure and how.
type Config struct {
	// MAC is the boot NIC (BOOTIF). Nil, or a MAC that does not show up
	// within LinkTimeout, picks the first Ethernet NIC with carrier.
	MAC net.HardwareAddr
	// LinkTimeout bounds the wait for the NIC (drivers load
	// asynchronously) and its carrier.
	LinkTimeout time.Duration
	// VendorClass is sent as DHCP option 60.
	VendorClass string
	// ResolvConf, when set, is written with the lease's DNS servers
	// (/etc/resolv.conf in the ramdisk; tests leave it empty).
	ResolvConf string
	// Server is castiron's address (the API URL's host), when it is one.
	// Up6 makes sure it is reachable.
	Server netip.Addr
	Log    *slog.Logger
}

func (c Config) withDefaults() Config {
	if c.LinkTimeout <= 0 {
		c.LinkTimeout = DefaultLinkTimeout
	}
	if c.VendorClass == "" {
		c.VendorClass = DefaultVendorClass
	}
	if c.Log == nil {
		c.Log = slog.New(slog.DiscardHandler)
	}
	return c
}

// Lease is an applied DHCP lease.
type Lease struct {
	Interface string
	MAC       net.HardwareAddr
	Address   net.IPNet
	Router    net.IP // nil when the server gave none
	DNS       []net.IP
	Server    net.IP // the DHCP server identifier
	Hostname  string
	Domain    string
	Duration  time.Duration // lease time
	Renewal   time.Duration // T1
	Acquired  time.Time

	raw *nclient4.Lease
}

// Up brings up lo and the boot NIC and leases an address, retrying DHCP
// with backoff until it succeeds or ctx ends.
func Up(ctx context.Context, cfg Config) (*Lease, error) {
	cfg = cfg.withDefaults()
	if err := setLoopbackUp(); err != nil {
		cfg.Log.Warn("lo up failed", "err", err)
	}
	link, err := waitLink(ctx, cfg)
	if err != nil {
		return nil, err
	}
	name, mac := link.Attrs().Name, link.Attrs().HardwareAddr
	// The dhcpv4 package draws transaction IDs with a non-blocking getrandom
	// in a loop, which early in the boot of a VM without an RNG device spins
	// for minutes (measured: still failing after 120 s under qemu TCG). The
	// agent starts SeedRandom at boot, so the pool is usually ready by now.
	SeedRandom(cfg.Log)
	cfg.Log.Info("DHCP", "nic", name, "mac", mac.String())
	for attempt := 0; ; attempt++ {
		raw, err := request(ctx, cfg, name, mac)
		if err == nil {
			lease := newLease(name, mac, raw)
			if err := apply(cfg, lease, nil); err != nil {
				return nil, err
			}
			cfg.Log.Info("address configured", "nic", name, "addr", lease.Address.String(),
				"router", ipString(lease.Router), "server", lease.Server.String(), "lease", lease.Duration)
			return lease, nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		d := backoff(attempt)
		cfg.Log.Warn("DHCP failed, retrying", "nic", name, "err", err, "in", d.Round(time.Millisecond))
		if err := sleep(ctx, d); err != nil {
			return nil, err
		}
	}
}

// SeedRandom returns once the kernel's random pool is initialized, at once
// if it already is. A blocking getrandom makes the kernel (>= 5.4) seed
// itself from CPU jitter, which takes about a second under qemu TCG: run it
// in a goroutine early in the boot so the wait overlaps other work.
func SeedRandom(log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var b [1]byte
	if _, err := unix.Getrandom(b[:], unix.GRND_NONBLOCK); err != unix.EAGAIN {
		return
	}
	start := time.Now()
	if _, err := unix.Getrandom(b[:], 0); err != nil {
		log.Warn("getrandom failed", "err", err)
		return
	}
	log.Info("kernel random pool ready", "waited", time.Since(start).Round(time.Millisecond))
}

// backoff doubles from 1 s up to 10 s, with jitter: machines powered on
// together should not DHCP in step.
func backoff(attempt int) time.Duration {
	d := 10 * time.Second
	if attempt < 4 {
		d = time.Second << attempt
	}
	return d/2 + rand.N(d/2+1)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func ipString(ip net.IP) string {
	if ip == nil {
		return "none"
	}
	return ip.String()
}

// ErrNoLink: no usable NIC appeared in time.
type ErrNoLink struct {
	MAC     net.HardwareAddr
	Waited  time.Duration
	Summary string // the links that were seen
}

func (e *ErrNoLink) Error() string {
	want := "any Ethernet NIC with carrier"
	if e.MAC != nil {
		want = "NIC " + e.MAC.String()
	}
	return fmt.Sprintf("no %s after %v (links: %s)", want, e.Waited, e.Summary)
}
