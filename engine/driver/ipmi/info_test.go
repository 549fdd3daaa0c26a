package ipmi

import (
	"bytes"
	"strings"
	"testing"

	"castiron/engine/driver"
	"castiron/fault"
)

func TestValidateDriverInfo(t *testing.T) {
	d := New(Config{})
	base := func(kv ...any) map[string]any {
		m := map[string]any{"ipmi_address": "10.0.0.5", "ipmi_username": "admin", "ipmi_password": "pw"}
		for i := 0; i < len(kv); i += 2 {
			if kv[i+1] == nil {
				delete(m, kv[i].(string))
			} else {
				m[kv[i].(string)] = kv[i+1]
			}
		}
		return m
	}
	tests := []struct {
		name string
		di   map[string]any
		kind fault.Kind // 0 (Internal) means valid
		msg  string
	}{
		{"minimal", base(), 0, ""},
		{"hostname", base("ipmi_address", "bmc-1.example.org"), 0, ""},
		{"ipv6", base("ipmi_address", "fd00::5"), 0, ""},
		{"port int", base("ipmi_port", 6230), 0, ""},
		{"port json number", base("ipmi_port", float64(623)), 0, ""},
		{"port string", base("ipmi_port", "623"), 0, ""},
		{"all options", base("ipmi_priv_level", "OPERATOR", "ipmi_protocol_version", "2.0", "ipmi_cipher_suite", "17",
			"ipmi_force_boot_device", "true", "ipmi_disable_boot_timeout", false, "ipmi_bridging", "no", "ipmi_terminal_port", 8023), 0, ""},
		{"protocol as number", base("ipmi_protocol_version", float64(2)), 0, ""},
		{"protocol 1.5", base("ipmi_protocol_version", "1.5"), 0, ""},
		{"null user and password", base("ipmi_username", nil, "ipmi_password", nil), 0, ""},
		{"numeric password", base("ipmi_password", float64(1234)), 0, ""},

		{"no driver_info", nil, fault.Invalid, "Missing the following IPMI credentials in node's driver_info: ipmi_address."},
		{"missing address", base("ipmi_address", nil), fault.Invalid, "Missing the following IPMI credentials in node's driver_info: ipmi_address."},
		{"empty address", base("ipmi_address", ""), fault.Invalid, "Missing the following IPMI credentials"},
		{"address not a string", base("ipmi_address", float64(10)), fault.Invalid, "Invalid IPMI address"},
		{"address with spaces", base("ipmi_address", "bad host"), fault.Invalid, `Invalid IPMI address "bad host"`},
		{"port text", base("ipmi_port", "abc"), fault.Invalid, `ipmi_port "abc" is not a valid port.`},
		{"port too big", base("ipmi_port", 70000), fault.Invalid, `ipmi_port "70000" is not a valid port.`},
		{"port zero", base("ipmi_port", 0), fault.Invalid, "is not a valid port"},
		{"port fraction", base("ipmi_port", 623.5), fault.Invalid, "is not a valid port"},
		{"terminal port", base("ipmi_terminal_port", "x"), fault.Invalid, `ipmi_terminal_port "x" is not a valid port.`},
		{"priv level", base("ipmi_priv_level", "root"), fault.Invalid, "Invalid privilege level value:root, the valid value can be one of ADMINISTRATOR, CALLBACK, OPERATOR, USER"},
		{"protocol", base("ipmi_protocol_version", "3.0"), fault.Invalid, "Invalid IPMI protocol version value 3.0"},
		{"cipher text", base("ipmi_cipher_suite", "fast"), fault.Invalid, "Invalid cipher suite fast, expected a number"},
		{"cipher unknown", base("ipmi_cipher_suite", 42), fault.Invalid, "Invalid cipher suite 42"},
		{"cipher with 1.5", base("ipmi_cipher_suite", 3, "ipmi_protocol_version", "1.5"), fault.Invalid, "Cipher suites cannot be used with IPMI 1.5"},
		{"user too long", base("ipmi_username", strings.Repeat("u", 17)), fault.Invalid, "at most 16 bytes"},
		{"user not string", base("ipmi_username", float64(5)), fault.Invalid, "ipmi_username"},
		{"password too long", base("ipmi_password", strings.Repeat("p", 21)), fault.Invalid, "at most 20 bytes"},
		{"password too long 1.5", base("ipmi_password", strings.Repeat("p", 17), "ipmi_protocol_version", "1.5"), fault.Invalid, "IPMI 1.5 passwords are at most 16 bytes"},
		{"force boot device", base("ipmi_force_boot_device", "maybe"), fault.Invalid, `Invalid value for ipmi_force_boot_device: "maybe" is not a boolean.`},
		{"bridging bad", base("ipmi_bridging", "triple"), fault.Invalid, "Invalid value for ipmi_bridging: triple"},
		{"bridging single", base("ipmi_bridging", "single"), fault.NotImplemented, "IPMI bridging is not supported"},
		{"kg odd", base("ipmi_hex_kg_key", "abc"), fault.Invalid, "Number of ipmi_hex_kg_key characters is not even"},
		{"kg unsupported", base("ipmi_hex_kg_key", "abcd"), fault.NotImplemented, "ipmi_hex_kg_key is not supported"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := driver.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", DriverInfo: tt.di}
			err := d.Validate(n)
			if tt.kind == 0 {
				if err != nil {
					t.Fatalf("want valid, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("want %v error %q, got nil", tt.kind, tt.msg)
			}
			if !fault.Is(err, tt.kind) {
				t.Errorf("kind = %v, want %v (%v)", fault.KindOf(err), tt.kind, err)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("message %q does not contain %q", err.Error(), tt.msg)
			}
		})
	}
}

// TestBootFlagBytes compares the Set System Boot Options parameter 5 data
// with the bytes Ironic's ipmitool driver sends (raw "0x00 0x08 0x05 ..." for
// UEFI; "chassis bootdev X [options=persistent]" for BIOS).
func TestBootFlagBytes(t *testing.T) {
	tests := []struct {
		device     string
		persistent bool
		uefi       bool
		vendor     string
		want       []byte
	}{
		{driver.BootPXE, false, false, "", []byte{0x80, 0x04, 0, 0, 0}},
		{driver.BootPXE, true, false, "", []byte{0xc0, 0x04, 0, 0, 0}},
		{driver.BootPXE, false, true, "", []byte{0xa0, 0x04, 0, 0, 0}},
		{driver.BootPXE, true, true, "", []byte{0xe0, 0x04, 0, 0, 0}},
		{driver.BootDisk, true, true, "", []byte{0xe0, 0x08, 0, 0, 0}},
		{driver.BootDisk, true, true, "supermicro", []byte{0xe0, 0x24, 0, 0, 0}},
		{driver.BootDisk, true, false, "supermicro", []byte{0xc0, 0x08, 0, 0, 0}},
		{driver.BootCDROM, false, true, "", []byte{0xa0, 0x14, 0, 0, 0}},
		{driver.BootBIOS, false, true, "", []byte{0xa0, 0x18, 0, 0, 0}},
		{driver.BootSafe, false, true, "", []byte{0xa0, 0x0c, 0, 0, 0}},
	}
	for _, tt := range tests {
		inf := &info{uefi: tt.uefi, vendor: tt.vendor}
		got := bootFlags(inf, tt.device, tt.persistent).Pack()
		if !bytes.Equal(got, tt.want) {
			t.Errorf("%s persistent=%t uefi=%t vendor=%q: % x, want % x", tt.device, tt.persistent, tt.uefi, tt.vendor, got, tt.want)
		}
	}
}
