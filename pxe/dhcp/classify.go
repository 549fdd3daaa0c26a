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

func classify(req *dhcpv4.DHCPv4) client {
	var c client
	vc := req.ClassIdentifier()
	switch {
	case strings.HasPrefix(vc, AgentVendorClass):
		c.agent = true
	case strings.HasPrefix(vc, "PXEClient"):
		c.pxe = true
	case strings.HasPrefix(vc, "HTTPClient"):
		c.http = true
	}
	if a := req.GetOneOption(dhcpv4.OptionClientSystemArchitectureType); len(a) >= 2 {
		// The first listed architecture is the one the firmware runs.
		c.arch, c.hasArch = binary.BigEndian.Uint16(a), true
	} else if a, ok := archFromVendorClass(vc); ok {
		c.arch, c.hasArch = a, true
	}
	if c.hasArch && (c.arch == archHTTPx64 || c.arch == archHTTPArm64) && !c.agent {
		c.http, c.pxe = true, false
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

// bootFile is what c should load next; "" for none (the agent, unknown
// firmware). The bool says the file is a UEFI HTTP boot URL.
func (s *Server) bootFile(c client, mac []byte) (string, bool) {
	switch {
	case c.agent:
		return "", false
	case c.ipxe:
		return s.cfg.ScriptURL(mac), false
	case c.http:
		if s.cfg.HTTPBootBase == "" {
			return "", false
		}
		switch c.arch {
		case archHTTPx64:
			return s.cfg.HTTPBootBase + s.cfg.EFIx64File, true
		case archHTTPArm64:
			return s.cfg.HTTPBootBase + s.cfg.EFIArm64File, true
		}
		return "", false
	case c.pxe:
		switch c.arch {
		case archBIOS:
			return s.cfg.BIOSFile, false
		case archEFIBC, archEFIx64:
			return s.cfg.EFIx64File, false
		case archEFIArm64:
			return s.cfg.EFIArm64File, false
		}
	}
	return "", false
}
