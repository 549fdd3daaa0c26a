package dhcp

import (
	"encoding/binary"
	"strconv"
	"strings"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// Client architectures (option 93, RFC 4578 and the IANA registry).
const (
	archBIOS      = 0
	archEFIBC     = 7 // EDK2/OVMF x64 sends 7 ("EFI BC"), meaning x86-64
	archEFIx64    = 9
	archEFIArm64  = 11
	archHTTPx64   = 16
	archHTTPArm64 = 19
)

// Options not named in dhcpv4.
const (
	optIPXEEncap     = 175 // iPXE's encapsulated options
	optIPXENoPXEDHCP = 176 // sub-option of 175: don't wait for ProxyDHCP
)

// client is what a request says about the software sending it.
type client struct {
	arch    uint16
	hasArch bool
	pxe     bool // option 60 "PXEClient..."
	http    bool // option 60 "HTTPClient..." (UEFI HTTP boot)
	ipxe    bool
	agent   bool // castiron's ramdisk agent
	// prl67: option 67 is in the parameter request list.
	prl67 bool
}

// vendorClass reads a vendor class (DHCPv4 option 60, a DHCPv6 option 16
// entry): castiron's agent, PXE or UEFI HTTP boot firmware, and the
// architecture in "PXEClient:Arch:00007:UNDI:003000" unless one is known.
func (c *client) vendorClass(vc string) {
	switch {
	case strings.HasPrefix(vc, AgentVendorClass):
		c.agent = true
	case strings.HasPrefix(vc, "PXEClient"):
		c.pxe = true
	case strings.HasPrefix(vc, "HTTPClient"):
		c.http = true
	}
	if a, ok := archFromVendorClass(vc); ok && !c.hasArch {
		c.arch, c.hasArch = a, true
	}
}

// archOption sets the architecture a client's architecture option names
// (the first listed is the one the firmware runs), then what it implies:
// HTTP boot architectures are UEFI HTTP boot clients.
func (c *client) archOption(arch uint16, ok bool) {
	if ok {
		c.arch, c.hasArch = arch, true
	}
	if c.hasArch && (c.arch == archHTTPx64 || c.arch == archHTTPArm64) && !c.agent {
		c.http, c.pxe = true, false
	}
}

func classify(req *dhcpv4.DHCPv4) client {
	var c client
	c.vendorClass(req.ClassIdentifier())
	a := req.GetOneOption(dhcpv4.OptionClientSystemArchitectureType)
	if len(a) >= 2 {
		c.archOption(binary.BigEndian.Uint16(a), true)
	} else {
		c.archOption(0, false)
	}
	// Every iPXE (ROM, undionly.kpxe, snponly.efi, ipxe.efi) sends option 77
	// as the raw bytes "iPXE" (not RFC 3004 length-prefixed; accept both)
	// and option 175: it gets the script, not iPXE again (chainload loop).
	c.ipxe = !c.agent && (req.Options.Has(dhcpv4.GenericOptionCode(optIPXEEncap)) || hasUserClass(req.GetOneOption(dhcpv4.OptionUserClassInformation), "iPXE"))
	for _, code := range req.GetOneOption(dhcpv4.OptionParameterRequestList) {
		if code == dhcpv4.OptionBootfileName.Code() {
			c.prl67 = true
			break
		}
	}
	return c
}

// hasUserClass reports whether option 77 data is want, either raw or as one
// entry of an RFC 3004 list of length-prefixed strings.
func hasUserClass(b []byte, want string) bool {
	if string(b) == want {
		return true
	}
	for len(b) > 0 {
		n := int(b[0])
		if n == 0 || 1+n > len(b) {
			return false
		}
		if string(b[1:1+n]) == want {
			return true
		}
		b = b[1+n:]
	}
	return false
}

// archFromVendorClass reads "PXEClient:Arch:00007:UNDI:003000".
func archFromVendorClass(vc string) (uint16, bool) {
	_, rest, ok := strings.Cut(vc, ":Arch:")
	if !ok || len(rest) < 5 {
		return 0, false
	}
	n, err := strconv.ParseUint(rest[:5], 10, 16)
	if err != nil {
		return 0, false
	}
	return uint16(n), true
}

// cpuArch names the CPU architecture of a firmware architecture code the
// way Ironic's cpu_arch does; "" for codes castiron has no ramdisk for.
func cpuArch(code uint16) string {
	switch code {
	case archBIOS, archEFIBC, archEFIx64, archHTTPx64:
		return "x86_64"
	case archEFIArm64, archHTTPArm64:
		return "aarch64"
	}
	return ""
}

// arch is c's CPU architecture, "" when it named none.
func (c client) cpuArch() string {
	if !c.hasArch {
		return ""
	}
	return cpuArch(c.arch)
}

// file is what c should load next; "" for none (the agent, unknown
// firmware). The bool says the file is a UEFI HTTP boot URL; a file that is
// neither that nor the iPXE script is a TFTP path.
func (b *BootFiles) file(c client, mac []byte) (string, bool) {
	switch {
	case c.agent:
		return "", false
	case c.ipxe:
		return b.ScriptURL(mac, c.cpuArch()), false
	case c.http:
		if b.HTTPBootBase == "" {
			return "", false
		}
		// arm64 HTTP boot gets nothing: its loader, Debian's network
		// GRUB, has no http module and could not load grub.cfg or the
		// kernel from where it came; the firmware falls back to PXE.
		if c.arch == archHTTPx64 {
			return b.HTTPBootBase + b.EFIx64File, true
		}
		return "", false
	case c.pxe:
		switch c.arch {
		case archBIOS:
			return b.BIOSFile, false
		case archEFIBC, archEFIx64:
			return b.EFIx64File, false
		case archEFIArm64:
			return b.EFIArm64File, false
		}
	}
	return "", false
}
