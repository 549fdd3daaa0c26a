package inventory

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
)

// hostInterface42 builds an SMBIOS type 42 structure as a BMC's firmware
// publishes it: a USB network host interface with one Redfish over IP
// record (service 169.254.0.1:443 "bmc.local", host 169.254.0.2 static).
func hostInterface42() []byte {
	rec := make([]byte, redfishRecordMin)
	copy(rec[0:16], []byte{0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff})
	rec[0x10] = 1 // static
	rec[0x11] = 1 // IPv4
	copy(rec[0x12:], []byte{169, 254, 0, 2})
	copy(rec[0x22:], []byte{255, 255, 0, 0})
	rec[0x32] = 1
	rec[0x33] = 1
	copy(rec[0x34:], []byte{169, 254, 0, 1})
	binary.LittleEndian.PutUint16(rec[0x54:], 443)
	binary.LittleEndian.PutUint32(rec[0x56:], 0)
	host := "bmc.local"
	rec[0x5a] = byte(len(host))
	rec = append(rec, host...)

	spec := []byte{0x02, 0x6b, 0x1d, 0x02, 0x01} // USB network device, vid/pid
	b := []byte{42, 0, 0x2a, 0x00, interfaceNetwork, byte(len(spec))}
	b = append(b, spec...)
	b = append(b, 1, protocolRedfishIP, byte(len(rec)))
	b = append(b, rec...)
	b[1] = byte(len(b))
	return append(b, 0, 0) // no strings
}

func TestParseHostInterface(t *testing.T) {
	hi := parseHostInterface(hostInterface42())
	if hi == nil {
		t.Fatal("not parsed")
	}
	if hi.DeviceType != "usb" || hi.ServiceAddress != "169.254.0.1" || hi.ServicePort != 443 || hi.ServiceHostname != "bmc.local" ||
		hi.HostAddress != "169.254.0.2" || hi.HostAssignment != "static" || hi.ServiceUUID != "00112233-4455-6677-8899-aabbccddeeff" {
		t.Errorf("%+v", hi)
	}
	full := hostInterface42()
	for i := 0; i < len(full); i++ { // every truncation: no panic, no garbage
		if got := parseHostInterface(full[:i]); got != nil && i < int(full[1]) {
			t.Errorf("truncated at %d parsed as %+v", i, got)
		}
	}
	if parseHostInterface([]byte{42, 7, 0, 0, 0x41, 0, 0}) != nil {
		t.Error("non-network interface parsed")
	}
}

func TestReadRedfishHostInterface(t *testing.T) {
	root := Root{Sys: t.TempDir()}
	if readRedfishHostInterface(root) != nil {
		t.Error("found one in an empty tree")
	}
	dir := filepath.Join(root.Sys, "firmware/dmi/entries/42-0")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "raw"), hostInterface42(), 0o644)
	if hi := readRedfishHostInterface(root); hi == nil || hi.ServiceAddress != "169.254.0.1" {
		t.Errorf("%+v", hi)
	}
}

func FuzzParseHostInterface(f *testing.F) {
	f.Add(hostInterface42())
	f.Fuzz(func(t *testing.T, b []byte) { parseHostInterface(b) })
}
