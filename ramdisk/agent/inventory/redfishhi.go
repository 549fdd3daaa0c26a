package inventory

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"

	"castiron/ramdisk/protocol"
)

// SMBIOS type 42 (Management Controller Host Interface, DSP0270): the
// kernel exports each structure under /sys/firmware/dmi/entries/42-N/raw.
const (
	smbiosHostInterface = 42
	interfaceNetwork    = 0x40 // Network Host Interface
	protocolRedfishIP   = 0x04 // Redfish over IP
	redfishRecordMin    = 0x5b // fixed part of the Redfish over IP record
)

// readRedfishHostInterface returns the first network host interface that
// carries a Redfish over IP record, nil when the firmware publishes none.
func readRedfishHostInterface(root Root) *protocol.RedfishHostInterface {
	dirs, _ := filepath.Glob(filepath.Join(root.Sys, "firmware/dmi/entries", fmt.Sprintf("%d-*", smbiosHostInterface)))
	sort.Strings(dirs)
	for _, d := range dirs {
		raw, err := os.ReadFile(filepath.Join(d, "raw"))
		if err != nil {
			continue
		}
		if hi := parseHostInterface(raw); hi != nil {
			return hi
		}
	}
	return nil
}

// parseHostInterface decodes one type 42 structure (bounds-checked: the
// bytes come from firmware).
func parseHostInterface(b []byte) *protocol.RedfishHostInterface {
	if len(b) < 7 || b[0] != smbiosHostInterface {
		return nil
	}
	formatted := int(b[1])
	if formatted > len(b) || formatted < 7 || b[4] != interfaceNetwork {
		return nil
	}
	b = b[:formatted]
	specLen := int(b[5])
	if 6+specLen+1 > len(b) {
		return nil
	}
	hi := &protocol.RedfishHostInterface{DeviceType: "other"}
	if specLen > 0 {
		switch b[6] {
		case 0x02:
			hi.DeviceType = "usb"
		case 0x03:
			hi.DeviceType = "pci"
		case 0x04:
			hi.DeviceType = "usb-v2"
		case 0x05:
			hi.DeviceType = "pci-v2"
		}
	}
	off := 6 + specLen
	records := int(b[off])
	off++
	for i := 0; i < records && off+2 <= len(b); i++ {
		ptype, plen := b[off], int(b[off+1])
		data := b[off+2:]
		if plen > len(data) {
			return nil
		}
		data = data[:plen]
		off += 2 + plen
		if ptype != protocolRedfishIP || len(data) < redfishRecordMin {
			continue
		}
		hi.ServiceUUID = smbiosUUID(data[0:16])
		hi.HostAssignment = assignment(data[0x10])
		hi.HostAddress = ipOf(data[0x11], data[0x12:0x22])
		hi.ServiceAddress = ipOf(data[0x33], data[0x34:0x44])
		hi.ServicePort = int(binary.LittleEndian.Uint16(data[0x54:0x56]))
		hi.ServiceVLAN = int(binary.LittleEndian.Uint32(data[0x56:0x5a]))
		if n := int(data[0x5a]); redfishRecordMin+n <= len(data) {
			hi.ServiceHostname = string(trimNUL(data[redfishRecordMin : redfishRecordMin+n]))
		}
		return hi
	}
	return nil
}

func assignment(t byte) string {
	switch t {
	case 1:
		return "static"
	case 2:
		return "dhcp"
	case 3:
		return "auto-configure"
	case 4:
		return "host-selected"
	}
	return ""
}

// ipOf reads a 16-byte address field: format 1 is IPv4 (first 4 bytes),
// 2 is IPv6.
func ipOf(format byte, b []byte) string {
	switch format {
	case 1:
		a := netip.AddrFrom4([4]byte(b[:4]))
		if a.IsUnspecified() {
			return ""
		}
		return a.String()
	case 2:
		a := netip.AddrFrom16([16]byte(b[:16]))
		if a.IsUnspecified() {
			return ""
		}
		return a.String()
	}
	return ""
}

// smbiosUUID formats an SMBIOS UUID: the first three fields are stored
// little-endian (SMBIOS 2.6+).
func smbiosUUID(b []byte) string {
	allZero := true
	for _, c := range b {
		allZero = allZero && c == 0
	}
	if allZero {
		return ""
	}
	return fmt.Sprintf("%08x-%04x-%04x-%x-%x", binary.LittleEndian.Uint32(b[0:4]), binary.LittleEndian.Uint16(b[4:6]),
		binary.LittleEndian.Uint16(b[6:8]), b[8:10], b[10:16])
}

func trimNUL(b []byte) []byte {
	for len(b) > 0 && b[len(b)-1] == 0 {
		b = b[:len(b)-1]
	}
	return b
}
