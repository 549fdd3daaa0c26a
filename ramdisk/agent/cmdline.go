package main

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"castiron/ramdisk/protocol"
)

// params are the kernel command-line parameters the agent reads.
type params struct {
	APIURL        string
	InspectionURL string
	BootIF        string           // as given: "01-aa-bb-cc-dd-ee-ff"
	BootMAC       net.HardwareAddr // parsed from BootIF; nil when absent or malformed
	NodeUUID      string
	Debug         bool
	// CollectLLDP and LLDPWait: ipa-collect-lldp, ipa-lldp-timeout.
	CollectLLDP bool
	LLDPWait    time.Duration
}

// serverAddr is castiron's address when the API URL (else the inspection
// URL) names one by IP; invalid for a host name.
func (p params) serverAddr() netip.Addr {
	raw := p.APIURL
	if raw == "" {
		raw = p.InspectionURL
	}
	u, err := url.Parse(raw)
	if err != nil {
		return netip.Addr{}
	}
	a, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

func readCmdline(path string) (params, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return params{}, err
	}
	return parseCmdline(string(b)), nil
}

// parseCmdline reads key=value words; a value may be double-quoted, as the
// kernel allows. The last occurrence of a key wins.
func parseCmdline(cmdline string) params {
	var p params
	for _, word := range splitCmdline(cmdline) {
		key, value, _ := strings.Cut(word, "=")
		switch key {
		case protocol.ParamAPIURL:
			p.APIURL = value
		case protocol.ParamInspectionURL:
			p.InspectionURL = value
		case protocol.ParamBootIF:
			p.BootIF = value
			p.BootMAC, _ = parseBootIF(value)
		case protocol.ParamNodeUUID:
			p.NodeUUID = value
		case protocol.ParamDebug:
			p.Debug = value == "" || value == "1" || strings.EqualFold(value, "true") || strings.EqualFold(value, "yes")
		case protocol.ParamCollectLLDP:
			p.CollectLLDP = value == "1" || strings.EqualFold(value, "true") || strings.EqualFold(value, "yes")
		case protocol.ParamLLDPTimeout:
			if f, err := strconv.ParseFloat(value, 64); err == nil && f > 0 && f <= 600 {
				p.LLDPWait = time.Duration(f * float64(time.Second))
			}
		}
	}
	return p
}

// splitCmdline splits on blanks outside double quotes and drops the quotes.
func splitCmdline(s string) []string {
	var words []string
	var cur strings.Builder
	inQuote, inWord := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, inWord = !inQuote, true
		case !inQuote && (r == ' ' || r == '\t' || r == '\n'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// parseBootIF reads pxelinux/iPXE's BOOTIF: the ARP hardware type (01 for
// Ethernet) then the MAC, dash-separated. A bare MAC is accepted too.
func parseBootIF(s string) (net.HardwareAddr, error) {
	parts := strings.FieldsFunc(s, func(r rune) bool { return r == '-' || r == ':' })
	if len(parts) == 7 {
		if parts[0] != "01" {
			return nil, fmt.Errorf("BOOTIF %q: hardware type %s is not Ethernet", s, parts[0])
		}
		parts = parts[1:]
	}
	mac, err := net.ParseMAC(strings.Join(parts, ":"))
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("BOOTIF %q is not 01-aa-bb-cc-dd-ee-ff", s)
	}
	return mac, nil
}
