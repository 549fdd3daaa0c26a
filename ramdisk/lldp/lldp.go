// Package lldp reads IEEE 802.1AB LLDP data units: the agent splits a
// captured frame into TLVs (ironic-python-agent's inventory format, a list
// of [type, hex value] per interface), and castiron turns those TLVs into
// Ironic's parsed_lldp names (the parse-lldp inspection hook's output).
//
// Hand-written: the TLV layout is a 16-bit header (7-bit type, 9-bit
// length) and the well-kept Go LLDP packages are not in castiron's module
// graph; the decoding below is a few dozen lines, fuzzed in lldp_test.go.
package lldp

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"unicode/utf8"
)

// EtherType is LLDP's Ethernet type.
const EtherType = 0x88cc

// TLV types (802.1AB-2016, table 8-1).
const (
	TypeEnd         = 0
	TypeChassisID   = 1
	TypePortID      = 2
	TypeTTL         = 3
	TypePortDesc    = 4
	TypeSysName     = 5
	TypeSysDesc     = 6
	TypeSysCaps     = 7
	TypeMgmtAddress = 8
	TypeOrgSpecific = 127
)

// maxValue is the longest TLV value (9-bit length).
const maxValue = 511

// TLV is one type-length-value of an LLDPDU.
type TLV struct {
	Type  int
	Value []byte
}

// Split reads the TLVs of an LLDPDU (the Ethernet payload), up to and
// without the End TLV. A truncated TLV is an error.
func Split(pdu []byte) ([]TLV, error) {
	var out []TLV
	for len(pdu) > 0 {
		if len(pdu) < 2 {
			return out, errors.New("lldp: truncated TLV header")
		}
		h := binary.BigEndian.Uint16(pdu)
		typ, n := int(h>>9), int(h&0x1ff)
		pdu = pdu[2:]
		if n > len(pdu) {
			return out, fmt.Errorf("lldp: TLV type %d wants %d bytes, %d left", typ, n, len(pdu))
		}
		if typ == TypeEnd {
			break
		}
		out = append(out, TLV{Type: typ, Value: pdu[:n]})
		pdu = pdu[n:]
	}
	return out, nil
}

// Raw is the TLVs as ironic-python-agent reports them in an interface's
// "lldp": [[type, "hex value"], ...].
func Raw(tlvs []TLV) [][2]any {
	out := make([][2]any, len(tlvs))
	for i, t := range tlvs {
		out[i] = [2]any{t.Type, hex.EncodeToString(t.Value)}
	}
	return out
}

// FromRaw reads the inventory's [[type, "hex"], ...] (JSON-decoded), as
// Ironic's parse-lldp hook does: entries that are not a number and a hex
// string are skipped.
func FromRaw(raw any) []TLV {
	list, _ := raw.([]any)
	var out []TLV
	for _, e := range list {
		pair, ok := e.([]any)
		if !ok || len(pair) != 2 {
			continue
		}
		typ, ok1 := tlvType(pair[0])
		val, ok2 := pair[1].(string)
		if !ok1 || !ok2 {
			continue
		}
		b, err := hex.DecodeString(val)
		if err != nil || len(b) > maxValue {
			continue
		}
		out = append(out, TLV{Type: typ, Value: b})
	}
	return out
}

// tlvType reads a TLV type as JSON decoding leaves it (float64, or
// json.Number under UseNumber).
func tlvType(v any) (int, bool) {
	switch v := v.(type) {
	case float64:
		return int(v), v == float64(int(v)) && v >= 0 && v < 128
	case json.Number:
		n, err := v.Int64()
		return int(n), err == nil && n >= 0 && n < 128
	case int:
		return v, v >= 0 && v < 128
	}
	return 0, false
}

// Parse names the TLVs as Ironic's LLDPBasicMgmtParser does (its keys:
// switch_chassis_id, switch_port_id, ...). A malformed TLV is skipped, a
// name set twice keeps its first value, as in Ironic. The 802.3 MAC/PHY
// TLV (MAU types) is not decoded.
func Parse(tlvs []TLV) map[string]any {
	nv := map[string]any{}
	set := func(k string, v any) {
		if _, ok := nv[k]; !ok {
			nv[k] = v
		}
	}
	add := func(k string, v any) {
		l, _ := nv[k].([]any)
		nv[k] = append(l, v)
	}
	for _, t := range tlvs {
		v := t.Value
		switch t.Type {
		case TypeChassisID:
			if s, ok := idValue(v, map[byte]string{4: "mac", 5: "iana"}); ok {
				set("switch_chassis_id", s)
			}
		case TypePortID:
			if s, ok := idValue(v, map[byte]string{3: "mac", 4: "iana"}); ok {
				set("switch_port_id", s)
			}
		case TypePortDesc:
			if utf8.Valid(v) {
				set("switch_port_description", string(v))
			}
		case TypeSysName:
			if utf8.Valid(v) {
				set("switch_system_name", string(v))
			}
		case TypeSysDesc:
			if utf8.Valid(v) {
				set("switch_system_description", string(v))
			}
		case TypeSysCaps:
			if len(v) == 4 {
				set("switch_capabilities_support", capabilities(binary.BigEndian.Uint16(v)))
				set("switch_capabilities_enabled", capabilities(binary.BigEndian.Uint16(v[2:])))
			}
		case TypeMgmtAddress:
			if len(v) >= 2 && int(v[0]) >= 1 && len(v) >= 1+int(v[0]) {
				if a, ok := ianaAddress(v[1 : 1+int(v[0])]); ok {
					add("switch_mgmt_addresses", a)
				}
			}
		case TypeOrgSpecific:
			if len(v) >= 4 {
				orgSpecific(hex.EncodeToString(v[:3]), v[3], v[4:], set, add)
			}
		}
	}
	return nv
}

// idValue decodes a chassis or port id by its subtype: MAC, network
// address (IANA family), or text for the others.
func idValue(v []byte, kinds map[byte]string) (string, bool) {
	if len(v) < 2 {
		return "", false
	}
	switch kinds[v[0]] {
	case "mac":
		if len(v) != 7 {
			return "", false
		}
		return net.HardwareAddr(v[1:]).String(), true
	case "iana":
		return ianaAddress(v[1:])
	}
	switch v[0] {
	case 1, 2, 3, 5, 6, 7:
		if utf8.Valid(v[1:]) {
			return string(v[1:]), true
		}
	}
	return "", false
}

// ianaAddress is an address family octet (1 IPv4, 2 IPv6, 6 MAC) and the
// address.
func ianaAddress(v []byte) (string, bool) {
	if len(v) < 1 {
		return "", false
	}
	switch {
	case v[0] == 1 && len(v) >= 5:
		return netip.AddrFrom4([4]byte(v[1:5])).String(), true
	case v[0] == 2 && len(v) >= 17:
		return netip.AddrFrom16([16]byte(v[1:17])).String(), true
	case v[0] == 6 && len(v) >= 7:
		return net.HardwareAddr(v[1:7]).String(), true
	}
	return "", false
}

// capabilities lists the system capability bits by Ironic's names.
func capabilities(bits uint16) []any {
	names := []string{"Other", "Repeater", "Bridge", "WLAN", "Router", "Telephone", "DOCSIS cable device", "Station only", "C-Vlan", "S-Vlan", "TPMR"}
	out := []any{}
	for i := 1; i < len(names); i++ {
		if bits&(1<<i) != 0 {
			out = append(out, names[i])
		}
	}
	return out
}

// orgSpecific decodes the 802.1 (00-80-c2) and 802.3 (00-12-0f) TLVs
// Ironic's parser knows.
func orgSpecific(oui string, sub byte, v []byte, set func(string, any), add func(string, any)) {
	switch oui {
	case "0080c2":
		switch sub {
		case 1: // port VLAN id
			if len(v) >= 2 {
				set("switch_port_untagged_vlan_id", int(binary.BigEndian.Uint16(v)))
			}
		case 2: // port and protocol VLAN id
			if len(v) == 3 {
				set("switch_port_protocol_vlan_enabled", v[0]&0x04 != 0)
				set("switch_port_protocol_vlan_support", v[0]&0x02 != 0)
				add("switch_port_protocol_vlan_ids", int(binary.BigEndian.Uint16(v[1:])))
			}
		case 3: // VLAN name
			if len(v) >= 3 && len(v) >= 3+int(v[2]) && utf8.Valid(v[3:3+int(v[2])]) {
				add("switch_port_vlans", map[string]any{"name": string(v[3 : 3+int(v[2])]), "id": int(binary.BigEndian.Uint16(v))})
			}
		case 4: // protocol identity
			if len(v) >= 1 && len(v) >= 1+int(v[0]) {
				add("switch_protocol_identities", hex.EncodeToString(v[1:1+int(v[0])]))
			}
		case 6: // management VID
			if len(v) >= 2 {
				set("switch_port_management_vlan_id", int(binary.BigEndian.Uint16(v)))
			}
		case 7: // link aggregation
			linkAggregation(v, set)
		}
	case "00120f":
		switch sub {
		case 3:
			linkAggregation(v, set)
		case 4: // maximum frame size
			if len(v) >= 2 {
				set("switch_port_mtu", int(binary.BigEndian.Uint16(v)))
			}
		}
	}
}

func linkAggregation(v []byte, set func(string, any)) {
	if len(v) != 5 {
		return
	}
	set("switch_port_link_aggregation_enabled", v[0]&0x02 != 0)
	set("switch_port_link_aggregation_support", v[0]&0x01 != 0)
	set("switch_port_link_aggregation_id", int(binary.BigEndian.Uint32(v[1:])))
}

// Encode writes TLVs as an LLDPDU, End TLV included (what a switch sends;
// tests and simulators use it). Values longer than 511 bytes are cut.
func Encode(tlvs []TLV) []byte {
	var out []byte
	for _, t := range append(tlvs, TLV{Type: TypeEnd}) {
		v := t.Value
		if len(v) > maxValue {
			v = v[:maxValue]
		}
		out = binary.BigEndian.AppendUint16(out, uint16(t.Type&0x7f)<<9|uint16(len(v)))
		out = append(out, v...)
	}
	return out
}
