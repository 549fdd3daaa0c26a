package workflow

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseMapsTripleOFields(t *testing.T) {
	js := `{"nodes": [
	  {"name": "ctl-0", "pm_type": "pxe_ipmitool", "pm_addr": "10.0.0.5", "pm_user": "admin",
	   "pm_password": "pw", "pm_port": "6230", "mac": ["52:54:00:AA:BB:01"],
	   "cpu": "4", "memory": 8192, "disk": "40", "arch": "x86_64",
	   "capabilities": {"profile": "control", "boot_mode": "uefi"},
	   "root_device": {"size": 40, "serial": "S1"}, "resource_class": "baremetal",
	   "kernel_id": "http://img/ipa.kernel", "ramdisk_id": "http://img/ipa.initramfs"},
	  {"name": "cmp-0", "pm_type": "ipmi", "pm_addr": "10.0.0.6",
	   "ports": [{"address": "52-54-00-aa-bb-02", "physical_network": "ctlplane"}]},
	  {"name": "f-0", "pm_type": "fake-hardware", "mac": ["52:54:00:aa:bb:03"]},
	  {"name": "f-1", "pm_type": "fake_pxe"},
	  {"name": "f-2", "pm_type": "manual-management"},
	  {"name": "f-3", "pm_type": "fake"}
	]}`
	specs, err := Parse([]byte(js), false)
	if err != nil {
		t.Fatal(err)
	}
	c := specs[0]
	if c.Driver != "ipmi" || c.BMC != "10.0.0.5:6230" {
		t.Errorf("driver %q bmc %q", c.Driver, c.BMC)
	}
	wantInfo := map[string]any{"ipmi_address": "10.0.0.5", "ipmi_username": "admin", "ipmi_password": "pw",
		"ipmi_port": 6230, "deploy_kernel": "http://img/ipa.kernel", "deploy_ramdisk": "http://img/ipa.initramfs"}
	if !reflect.DeepEqual(c.DriverInfo, wantInfo) {
		t.Errorf("driver_info %v", c.DriverInfo)
	}
	wantProps := map[string]any{"cpus": 4, "memory_mb": 8192, "local_gb": 40, "cpu_arch": "x86_64",
		"capabilities": "boot_mode:uefi,profile:control", "root_device": map[string]any{"size": int64(40), "serial": "S1"}}
	if !reflect.DeepEqual(c.Properties, wantProps) {
		t.Errorf("properties %#v", c.Properties)
	}
	if c.ResourceClass != "baremetal" || !reflect.DeepEqual(c.MACs(), []string{"52:54:00:aa:bb:01"}) {
		t.Errorf("resource_class %q macs %v", c.ResourceClass, c.MACs())
	}
	cmp := specs[1]
	if cmp.BMC != "10.0.0.6:623" || cmp.Ports[0]["address"] != "52:54:00:aa:bb:02" || cmp.Ports[0]["physical_network"] != "ctlplane" {
		t.Errorf("cmp-0: bmc %q ports %v", cmp.BMC, cmp.Ports)
	}
	if _, ok := cmp.DriverInfo["ipmi_port"]; ok {
		t.Errorf("ipmi_port set although pm_port was not given: %v", cmp.DriverInfo)
	}
	for i, want := range []string{"fake-hardware", "manual-management", "manual-management", "fake"} {
		if s := specs[2+i]; s.Driver != want || s.BMC != "" || len(s.DriverInfo) != 0 {
			t.Errorf("%s: driver %q bmc %q info %v, want %s", s.Name, s.Driver, s.BMC, s.DriverInfo, want)
		}
	}
}

func TestParseYAMLEqualsJSON(t *testing.T) {
	js := `{"nodes":[{"name":"n1","pm_type":"ipmi","pm_addr":"192.0.2.1","pm_user":"u","pm_password":"p","pm_port":623,
	  "mac":["52:54:00:00:00:01"],"cpu":2,"memory":"4096","disk":10,"arch":"aarch64","capabilities":"profile:compute"}]}`
	yml := `
nodes:
  - name: n1
    pm_type: ipmi
    pm_addr: 192.0.2.1
    pm_user: u
    pm_password: p
    pm_port: 623
    mac: ["52:54:00:00:00:01"]
    cpu: 2
    memory: "4096"
    disk: 10
    arch: aarch64
    capabilities: profile:compute
`
	a, err := Parse([]byte(js), false)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse([]byte(yml), true)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Errorf("JSON and YAML differ:\n%#v\n%#v", a[0], b[0])
	}
	// Without the hint, a document that does not start like JSON is YAML.
	if c, err := Parse([]byte(yml), false); err != nil || !reflect.DeepEqual(a, c) {
		t.Errorf("YAML sniffing: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      []string
	}{
		{"not json", `{"nodes": [`, []string{"not valid JSON"}},
		{"no nodes", `{"machines": []}`, []string{`"nodes" must be a list`}},
		{"no pm_type", `{"nodes":[{"name":"a"}]}`, []string{"a: pm_type is required"}},
		{"ipmi without address", `{"nodes":[{"name":"a","pm_type":"pxe_ipmitool"}]}`, []string{"a: pm_addr is required"}},
		{"unknown driver", `{"nodes":[{"name":"a","pm_type":"pxe_ssh"}]}`, []string{`unsupported pm_type "pxe_ssh"`}},
		{"typo", `{"nodes":[{"name":"a","pm_type":"fake","pm_adress":"x"}]}`, []string{`a: unknown key "pm_adress"`}},
		{"bad mac", `{"nodes":[{"name":"a","pm_type":"fake","mac":["zz"]}]}`, []string{`a: mac "zz" is not a MAC address`}},
		{"bad port", `{"nodes":[{"name":"a","pm_type":"ipmi","pm_addr":"h","pm_port":"x"}]}`, []string{"pm_port must be a port number"}},
		{"bad cpu", `{"nodes":[{"name":"a","pm_type":"fake","cpu":"many"}]}`, []string{"cpu must be a non-negative integer"}},
		{"bad uuid", `{"nodes":[{"uuid":"nope","pm_type":"fake"}]}`, []string{`uuid "nope" is not a UUID`}},
		{"duplicates", `{"nodes":[
			{"name":"a","pm_type":"ipmi","pm_addr":"10.0.0.1","mac":["52:54:00:00:00:01"]},
			{"name":"a","pm_type":"ipmi","pm_addr":"10.0.0.1","pm_port":623,"ports":[{"address":"52:54:00:00:00:01"}]},
			{"name":"b","pm_type":"ipmi","pm_addr":"10.0.0.1","pm_port":624,"mac":["52:54:00:00:00:02","52:54:00:00:00:02"]}]}`,
			[]string{"duplicate name a: a and a", "duplicate MAC 52:54:00:00:00:01: a and a",
				"duplicate BMC address 10.0.0.1:623: a and a", "b: MAC 52:54:00:00:00:02 is listed twice"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc), false)
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error lacks %q: %v", w, err)
				}
			}
			var ve *ValidationError
			if tc.name != "not json" && !errors.As(err, &ve) {
				t.Errorf("not a ValidationError: %T", err)
			}
		})
	}
}

func TestSetCapability(t *testing.T) {
	for _, tc := range [][3]string{
		{"", "boot_mode:uefi", "uefi"},
		{"profile:compute", "profile:compute,boot_mode:bios", "bios"},
		{"boot_mode:bios,profile:x", "boot_mode:uefi,profile:x", "uefi"},
	} {
		if got := setCapability(tc[0], "boot_mode", tc[2]); got != tc[1] {
			t.Errorf("setCapability(%q) = %q, want %q", tc[0], got, tc[1])
		}
	}
}

// Redfish entries as TripleO writes them (pm_type redfish, pm_addr with or
// without a scheme, pm_system_id, redfish_verify_ca); a pm_port goes into
// the address, since Redfish has no port key.
func TestParseRedfish(t *testing.T) {
	js := `{"nodes": [
	  {"name": "rf-0", "pm_type": "redfish", "pm_addr": "https://bmc0.example.com", "pm_user": "root",
	   "pm_password": "calvin", "pm_system_id": "/redfish/v1/Systems/System.Embedded.1", "mac": ["52:54:00:aa:cc:01"]},
	  {"name": "rf-1", "pm_type": "redfish", "pm_addr": "10.0.0.7", "pm_port": 8000, "pm_user": "admin",
	   "pm_password": "password", "redfish_verify_ca": false},
	  {"name": "rf-2", "pm_type": "pxe_redfish", "pm_addr": "http://10.0.0.7:8000", "pm_port": "8000",
	   "pm_system_id": "/redfish/v1/Systems/b"},
	  {"name": "rf-3", "pm_type": "redfish", "pm_addr": "http://10.0.0.8:8000", "pm_port": 9000}
	]}`
	_, err := Parse([]byte(js), false)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 || !strings.Contains(ve.Problems[0], `rf-3: pm_port 9000 contradicts the port in pm_addr "http://10.0.0.8:8000"`) {
		t.Fatalf("conflicting port: %v", err)
	}
	specs, err := Parse([]byte(strings.Replace(js, `"pm_port": 9000`, `"pm_port": 8000`, 1)), false)
	if err != nil {
		t.Fatal(err)
	}
	want := []map[string]any{
		{"redfish_address": "https://bmc0.example.com", "redfish_username": "root", "redfish_password": "calvin",
			"redfish_system_id": "/redfish/v1/Systems/System.Embedded.1"},
		{"redfish_address": "10.0.0.7:8000", "redfish_username": "admin", "redfish_password": "password", "redfish_verify_ca": false},
		{"redfish_address": "http://10.0.0.7:8000", "redfish_system_id": "/redfish/v1/Systems/b"},
	}
	for i, w := range want {
		if s := specs[i]; s.Driver != "redfish" || !reflect.DeepEqual(s.DriverInfo, w) {
			t.Errorf("%s: driver %q driver_info %v, want %v", s.Name, s.Driver, s.DriverInfo, w)
		}
	}
	if specs[0].BMC != "https://bmc0.example.com#/redfish/v1/Systems/System.Embedded.1" || specs[1].BMC != "10.0.0.7:8000#" {
		t.Errorf("BMC identities %q %q", specs[0].BMC, specs[1].BMC)
	}
}
