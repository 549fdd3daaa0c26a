// Package dhcp is castiron's embedded DHCP server for network boot. In full
// mode it owns an isolated provisioning network and hands out addresses with
// durable leases; in proxy mode it sits beside the site's DHCP server and
// answers PXE clients with boot options only (ProxyDHCP, RFC 4578 / PXE 2.1).
// Every machine is asked about first (boot.Gate): one castiron was not asked
// to boot gets no answer at all.
package dhcp

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"castiron/pxe/boot"
)

// Mode is how the server shares the network.
type Mode string

const (
	// ModeFull hands out addresses from the range (isolated provisioning network).
	ModeFull Mode = "full"
	// ModeProxy answers only PXE clients, with boot options and no address.
	ModeProxy Mode = "proxy"
)

// Defaults.
const (
	DefaultLeaseTime = time.Hour
	DefaultOfferHold = 30 * time.Second
	DefaultBIOSFile  = "undionly.kpxe"
	DefaultEFIx64    = "snponly.efi"
	// DefaultEFIArm64 is Debian's signed network GRUB for arm64: Debian
	// ships no arm64 iPXE (lab ARM64.md); castiron serves it from the arm64
	// ramdisk's directory and answers its grub/grub.cfg per node.
	DefaultEFIArm64 = "grubnetaa64.efi"
	DefaultWorkers  = 8
	// DefaultLoops is how many DHCPv4 packet loops share port 67: one
	// reads while the other waits for its round's commit (or a slow gate).
	DefaultLoops = 2
	// AgentVendorClass is what castiron's ramdisk agent sends as option 60.
	AgentVendorClass = "castiron-agent"
)

// Config configures a Server.
type Config struct {
	// Interface is the only interface the server listens and answers on.
	Interface string
	// Mode is ModeFull (default) or ModeProxy.
	Mode Mode
	// ServerIP is this server's address: server identifier (option 54) and
	// next-server (siaddr, the TFTP server).
	ServerIP netip.Addr

	// Full mode: addresses RangeStart..RangeEnd (inclusive) of the subnet
	// RangeStart/Netmask. Requests relayed through a giaddr outside that
	// subnet are not ours and are ignored.
	RangeStart, RangeEnd netip.Addr
	Netmask              net.IPMask
	Router               netip.Addr    // optional (option 3)
	LeaseTime            time.Duration // default 1h
	// OfferHold is how long an OFFER reserves its address (in memory only).
	OfferHold time.Duration

	// BootFiles says what each firmware loads next.
	BootFiles

	// Workers is how many packet loops read and handle packets on port 67
	// (default DefaultLoops). A loop waits for its round's lease commit;
	// the others read meanwhile, and their commits share the store's
	// group commit.
	Workers int
	// Meter counts packets by type and answer (metrics); nil counts nothing.
	Meter boot.Meter
}

// BootFiles says what each firmware loads next: the first-stage iPXE (or
// GRUB) binaries by architecture, and the iPXE script. The DHCPv4 and DHCPv6
// servers share it.
type BootFiles struct {
	// Boot files (TFTP paths) of iPXE per firmware.
	BIOSFile     string // option 93 = 0; default undionly.kpxe
	EFIx64File   string // 7, 9; default snponly.efi (ipxe.efi brings its own drivers)
	EFIArm64File string // 11; default grubnetaa64.efi
	// HTTPBootBase is the URL prefix under which the iPXE EFI binaries are
	// served over HTTP for x86-64 UEFI HTTP boot clients (option 93 = 16), e.g.
	// "http://10.201.0.1:8080/boot/"; the file name above is appended.
	// Empty: HTTP boot clients get no boot file.
	HTTPBootBase string
	// ScriptURL gives the iPXE script URL for a MAC and the CPU architecture
	// the firmware reported ("x86_64", "aarch64"; "" when it said none).
	// Required: iPXE gets it instead of iPXE again.
	ScriptURL func(mac net.HardwareAddr, arch string) string
}

func (b *BootFiles) setDefaults() {
	if b.BIOSFile == "" {
		b.BIOSFile = DefaultBIOSFile
	}
	if b.EFIx64File == "" {
		b.EFIx64File = DefaultEFIx64
	}
	if b.EFIArm64File == "" {
		b.EFIArm64File = DefaultEFIArm64
	}
}

// subnet is the provisioning subnet in host order.
type subnet struct {
	first, last uint32 // the range
	network     uint32
	mask        uint32
	server      uint32
	router      uint32
}

func (s subnet) contains(ip uint32) bool { return ip&s.mask == s.network }
func (s subnet) broadcast() uint32       { return s.network | ^s.mask }

// maxRange bounds the range: the free-address scan is linear in it.
const maxRange = 1 << 20

func (c *Config) setDefaults() {
	if c.Meter == nil {
		c.Meter = boot.NoMeter{}
	}
	if c.Mode == "" {
		c.Mode = ModeFull
	}
	if c.LeaseTime <= 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.OfferHold <= 0 {
		c.OfferHold = DefaultOfferHold
	}
	c.BootFiles.setDefaults()
	if c.Workers <= 0 {
		c.Workers = DefaultLoops
	}

}

// validate checks c (defaults set) and returns the subnet (zero in proxy mode).
func (c *Config) validate() (subnet, error) {
	var errs []error
	if c.Interface == "" {
		errs = append(errs, errors.New("Interface is required"))
	}
	if !c.ServerIP.Is4() {
		errs = append(errs, fmt.Errorf("ServerIP %v is not an IPv4 address", c.ServerIP))
	}
	if c.ScriptURL == nil {
		errs = append(errs, errors.New("ScriptURL is required"))
	}
	var sn subnet
	switch c.Mode {
	case ModeProxy:
	case ModeFull:
		ones, bits := c.Netmask.Size()
		if bits != 32 || ones == 0 || ones > 30 {
			errs = append(errs, fmt.Errorf("Netmask %v is not an IPv4 netmask of /1 to /30", c.Netmask))
			break
		}
		if !c.RangeStart.Is4() || !c.RangeEnd.Is4() {
			errs = append(errs, errors.New("RangeStart and RangeEnd must be IPv4 addresses"))
			break
		}
		sn.mask = ^uint32(0) << (32 - ones)
		sn.first, sn.last = u32(c.RangeStart), u32(c.RangeEnd)
		sn.network = sn.first & sn.mask
		sn.server = u32(c.ServerIP)
		if c.Router.IsValid() {
			if !c.Router.Is4() {
				errs = append(errs, fmt.Errorf("Router %v is not an IPv4 address", c.Router))
			}
			sn.router = u32(c.Router)
		}
		switch {
		case sn.last < sn.first:
			errs = append(errs, fmt.Errorf("range %v-%v is empty", c.RangeStart, c.RangeEnd))
		case !sn.contains(sn.last):
			errs = append(errs, fmt.Errorf("range %v-%v spans more than one subnet", c.RangeStart, c.RangeEnd))
		case sn.first == sn.network || sn.last == sn.broadcast():
			errs = append(errs, fmt.Errorf("range %v-%v includes the network or broadcast address", c.RangeStart, c.RangeEnd))
		case sn.last-sn.first >= maxRange:
			errs = append(errs, fmt.Errorf("range %v-%v is larger than %d addresses", c.RangeStart, c.RangeEnd, maxRange))
		}
	default:
		errs = append(errs, fmt.Errorf("Mode %q is neither %q nor %q", c.Mode, ModeFull, ModeProxy))
	}
	if err := errors.Join(errs...); err != nil {
		return subnet{}, fmt.Errorf("dhcp: config: %w", err)
	}
	return sn, nil
}

// u32 is an IPv4 address in host order (0 for anything else).
func u32(a netip.Addr) uint32 {
	if !a.Is4() {
		return 0
	}
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func addrOf(v uint32) netip.Addr {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func ipOf(v uint32) net.IP { return net.IPv4(byte(v>>24), byte(v>>16), byte(v>>8), byte(v)).To4() }

// u32IP reads a 4-byte (or 16-byte v4-mapped) net.IP; 0 when absent.
func u32IP(ip net.IP) uint32 {
	ip4 := ip.To4()
	if ip4 == nil {
		return 0
	}
	return uint32(ip4[0])<<24 | uint32(ip4[1])<<16 | uint32(ip4[2])<<8 | uint32(ip4[3])
}
