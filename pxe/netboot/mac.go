package netboot

import (
	"encoding/hex"
	"net"
	"strings"
)

// parseMAC accepts the spellings a boot URL carries: iPXE's ${net0/mac}
// (aa:bb:cc:dd:ee:ff), hexhyp (aa-bb-...), pxelinux's BOOTIF (01-aa-bb-...)
// and hexraw (aabbccddeeff), any case. Only 6-byte Ethernet addresses.
func parseMAC(s string) (net.HardwareAddr, bool) {
	s = strings.TrimSpace(s)
	if len(s) == 20 && strings.HasPrefix(s, "01-") {
		s = s[3:] // BOOTIF: ARP hardware type 1 (Ethernet), then the MAC
	}
	if len(s) == 12 {
		b, err := hex.DecodeString(s)
		if err != nil {
			return nil, false
		}
		return net.HardwareAddr(b), true
	}
	mac, err := net.ParseMAC(s)
	if err != nil || len(mac) != 6 {
		return nil, false
	}
	return mac, true
}
