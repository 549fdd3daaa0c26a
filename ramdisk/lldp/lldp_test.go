package lldp

import (
	"encoding/binary"
	"encoding/json"
	"reflect"
	"testing"
)

// tlv encodes one TLV.
func tlv(typ int, v ...byte) []byte {
	h := make([]byte, 2, 2+len(v))
	binary.BigEndian.PutUint16(h, uint16(typ<<9|len(v)))
	return append(h, v...)
}

func cat(parts ...[]byte) []byte {
	var out []byte
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// testPDU is an LLDPDU as a top-of-rack switch sends it.
func testPDU() []byte {
	return cat(
		tlv(TypeChassisID, 4, 0x00, 0x11, 0x22, 0xaa, 0xbb, 0xcc),
		tlv(TypePortID, append([]byte{5}, "Ethernet1/7"...)...),
		tlv(TypeTTL, 0, 120),
		tlv(TypePortDesc, []byte("to worker-0 eth0")...),
		tlv(TypeSysName, []byte("tor-a.rack1")...),
		tlv(TypeSysDesc, []byte("Example NOS 4.2")...),
		tlv(TypeSysCaps, 0x00, 0x14, 0x00, 0x04), // supports bridge+router, bridge enabled
		tlv(TypeMgmtAddress, 5, 1, 192, 0, 2, 10, 2, 0, 0, 0, 1, 0),
		tlv(TypeOrgSpecific, 0x00, 0x80, 0xc2, 1, 0x00, 0x64), // port VLAN 100
		tlv(TypeOrgSpecific, append([]byte{0x00, 0x80, 0xc2, 3, 0x00, 0x64, 4}, "prov"...)...),
		tlv(TypeOrgSpecific, 0x00, 0x12, 0x0f, 4, 0x23, 0x28), // MTU 9000
		tlv(TypeEnd),
	)
}

// TestSplitRawParse: a switch's LLDPDU, split into TLVs, written as the
// agent writes them into the inventory ([type, hex] pairs), read back from
// JSON as castiron reads the inventory, and named as Ironic's parse-lldp
// hook names them.
func TestSplitRawParse(t *testing.T) {
	tlvs, err := Split(testPDU())
	if err != nil {
		t.Fatal(err)
	}
	if len(tlvs) != 11 {
		t.Fatalf("%d TLVs, want 11 (End not included)", len(tlvs))
	}
	b, _ := json.Marshal(Raw(tlvs))
	if want := `[1,"04001122aabbcc"]`; string(b[1:len(want)+1]) != want {
		t.Fatalf("raw %s, want it to start with %s", b, want)
	}
	var back any
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	got := Parse(FromRaw(back))
	want := map[string]any{
		"switch_chassis_id":            "00:11:22:aa:bb:cc",
		"switch_port_id":               "Ethernet1/7",
		"switch_port_description":      "to worker-0 eth0",
		"switch_system_name":           "tor-a.rack1",
		"switch_system_description":    "Example NOS 4.2",
		"switch_capabilities_support":  []any{"Bridge", "Router"},
		"switch_capabilities_enabled":  []any{"Bridge"},
		"switch_mgmt_addresses":        []any{"192.0.2.10"},
		"switch_port_untagged_vlan_id": 100,
		"switch_port_vlans":            []any{map[string]any{"name": "prov", "id": 100}},
		"switch_port_mtu":              9000,
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("parsed\n%#v\nwant\n%#v", got, want)
	}
}

// TestMalformed: truncated PDUs are errors with the TLVs read so far; bad
// values are skipped, never a panic.
func TestMalformed(t *testing.T) {
	pdu := testPDU()
	if _, err := Split(pdu[:5]); err == nil {
		t.Fatal("truncated TLV accepted")
	}
	bad := []TLV{{TypeChassisID, []byte{4, 1, 2}}, {TypeSysCaps, []byte{1}}, {TypeMgmtAddress, []byte{9, 1}}, {TypeOrgSpecific, []byte{0, 0x80}}}
	if got := Parse(bad); len(got) != 0 {
		t.Fatalf("malformed TLVs parsed: %v", got)
	}
	if got := FromRaw([]any{[]any{"x", "00"}, []any{1.0, "zz"}, "junk"}); len(got) != 0 {
		t.Fatalf("bad raw entries read: %v", got)
	}
}

func FuzzSplitParse(f *testing.F) {
	f.Add(testPDU())
	f.Fuzz(func(t *testing.T, b []byte) {
		tlvs, _ := Split(b)
		Parse(tlvs)
	})
}
