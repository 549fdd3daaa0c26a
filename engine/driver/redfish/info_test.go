package redfish

import (
	"strings"
	"testing"

	"castiron/engine/driver"
	"castiron/fault"
)

func TestParseInfo(t *testing.T) {
	dir := t.TempDir()
	const uuid = "7265646a-0000-4000-8000-000000000001"
	for _, tt := range []struct {
		name    string
		di      map[string]any
		base    string // want info.base ("" : want an error)
		root    string
		system  string
		verify  bool
		ca      string
		auth    string
		errWant string // Ironic's message (substring)
	}{
		{name: "scheme defaults to https", di: map[string]any{"redfish_address": "10.0.0.5"},
			base: "https://10.0.0.5", root: "/redfish/v1", verify: true, auth: "auto"},
		{name: "host and port", di: map[string]any{"redfish_address": "bmc.example.com:8443"},
			base: "https://bmc.example.com:8443", root: "/redfish/v1", verify: true, auth: "auto"},
		{name: "http and a root prefix", di: map[string]any{"redfish_address": "http://127.0.0.1:8000/redfish/v1/", "redfish_system_id": "/redfish/v1/Systems/abc"},
			base: "http://127.0.0.1:8000", root: "/redfish/v1", system: "/redfish/v1/Systems/abc", verify: true, auth: "auto"},
		{name: "other root", di: map[string]any{"redfish_address": "https://bmc/api/rf"},
			base: "https://bmc", root: "/api/rf", verify: true, auth: "auto"},
		{name: "bare IPv6", di: map[string]any{"redfish_address": "fd00::5"},
			base: "https://[fd00::5]", root: "/redfish/v1", verify: true, auth: "auto"},
		{name: "bare system id", di: map[string]any{"redfish_address": "bmc", "redfish_system_id": "1"},
			base: "https://bmc", root: "/redfish/v1", system: "/redfish/v1/Systems/1", verify: true, auth: "auto"},
		{name: "verify false string", di: map[string]any{"redfish_address": "bmc", "redfish_verify_ca": "False", "redfish_auth_type": "basic"},
			base: "https://bmc", root: "/redfish/v1", verify: false, auth: "basic"},
		{name: "verify CA path", di: map[string]any{"redfish_address": "bmc", "redfish_verify_ca": dir, "redfish_auth_type": "session"},
			base: "https://bmc", root: "/redfish/v1", verify: true, ca: dir, auth: "session"},
		{name: "ilo5 driver_info", di: map[string]any{"ilo_address": "10.0.0.9", "ilo_username": "u", "ilo_password": "p", "client_port": "8443", "ilo_verify_ca": false},
			base: "https://10.0.0.9:8443", root: "/redfish/v1", system: "/redfish/v1/Systems/1", verify: false, auth: "auto"},
		{name: "ilo5 driver_info, IPv6, default port", di: map[string]any{"ilo_address": "fd00::9"},
			base: "https://[fd00::9]", root: "/redfish/v1", system: "/redfish/v1/Systems/1", verify: true, auth: "auto"},
		{name: "redfish_address wins over ilo_address", di: map[string]any{"ilo_address": "10.0.0.9", "redfish_address": "http://127.0.0.1:8000"},
			base: "http://127.0.0.1:8000", root: "/redfish/v1", verify: true, auth: "auto"},
		{name: "missing address", di: map[string]any{"redfish_username": "u"},
			errWant: "Missing the following Redfish properties in node " + uuid + " driver_info: ['redfish_address']"},
		{name: "bad scheme", di: map[string]any{"redfish_address": "ftp://bmc"},
			errWant: "Invalid Redfish address ftp://bmc set in driver_info/redfish_address on node " + uuid},
		{name: "not a string", di: map[string]any{"redfish_address": 42.0},
			errWant: "Invalid Redfish address 42 set in driver_info/redfish_address"},
		{name: "system id not a string", di: map[string]any{"redfish_address": "bmc", "redfish_system_id": 1.0},
			errWant: "Invalid value \"1\" set in driver_info/redfish_system_id on node " + uuid + ". The value should be a path (string)"},
		{name: "verify junk", di: map[string]any{"redfish_address": "bmc", "redfish_verify_ca": "/no/such/ca.pem"},
			errWant: "Invalid value type set in driver_info/redfish_verify_ca on node " + uuid + ". The value should be a Boolean or the path to a file/directory, not \"/no/such/ca.pem\""},
		{name: "auth junk", di: map[string]any{"redfish_address": "bmc", "redfish_auth_type": "kerberos"},
			errWant: "Invalid value \"kerberos\" set in driver_info/redfish_auth_type on node " + uuid + ". The value should be one of \"basic\", \"session\" or \"auto\"."},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inf, err := parseInfo(driver.Node{UUID: uuid, DriverInfo: tt.di})
			if tt.errWant != "" {
				if !fault.Is(err, fault.Invalid) || !strings.Contains(err.Error(), tt.errWant) {
					t.Fatalf("got %v, want %q", err, tt.errWant)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if inf.base != tt.base || inf.root != tt.root || inf.systemID != tt.system || inf.verify != tt.verify ||
				inf.caPath != tt.ca || inf.authType != tt.auth {
				t.Fatalf("got %+v", *inf)
			}
		})
	}
}

func TestPropertiesNameEveryKey(t *testing.T) {
	var names []string
	for _, p := range Properties() {
		if p.Description == "" {
			t.Errorf("%s has no description", p.Name)
		}
		names = append(names, p.Name)
	}
	want := "redfish_address redfish_system_id redfish_username redfish_password redfish_verify_ca redfish_auth_type"
	if strings.Join(names, " ") != want {
		t.Fatalf("properties %v", names)
	}
}

// BMCAddress names the BMC (what power sync bounds its reads per): nodes
// on one Redfish service share it, whatever their system id.
func TestBMCAddress(t *testing.T) {
	d := New(Config{})
	for _, c := range []struct {
		addr, system, want string
	}{
		{"10.0.0.5", "/redfish/v1/Systems/1", "https://10.0.0.5"},
		{"http://127.0.0.1:8000", "/redfish/v1/Systems/a", "http://127.0.0.1:8000"},
		{"http://127.0.0.1:8000", "/redfish/v1/Systems/b", "http://127.0.0.1:8000"},
	} {
		n := driver.Node{UUID: "6c616230-0000-4000-8000-000000000001", DriverInfo: map[string]any{
			"redfish_address": c.addr, "redfish_system_id": c.system, "redfish_username": "u", "redfish_password": "p"}}
		if got := d.BMCAddress(n); got != c.want {
			t.Errorf("%s: %q, want %q", c.addr, got, c.want)
		}
	}
	if got := d.BMCAddress(driver.Node{DriverInfo: map[string]any{}}); got != "" {
		t.Errorf("no address: %q", got)
	}
}
