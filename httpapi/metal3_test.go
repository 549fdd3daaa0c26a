package httpapi

import (
	"net/http"
	"strings"
	"testing"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/engine/driver/ipmi"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
)

// TestMetal3NodeCreates sends the node-create bodies of Metal3's
// baremetal-operator v0.13.2 (../shared/metal3/README.md, one per BMC
// address type castiron has hardware types for), with the
// "disable_power_off": false BMO always sends: accepted at the versions
// BMO picks now that castiron offers 1.95 and above (1.95, 1.109, 1.110 and
// the maximum), answered 406 at 1.89 as current Ironic answers it. An
// interface castiron lacks is Ironic's 400 naming it.
func TestMetal3NodeCreates(t *testing.T) {
	d := fake.New()
	rf := redfish.New(redfish.Config{Logger: enginetest.Quiet()})
	t.Cleanup(func() { _ = rf.Close(t.Context()) })
	ip := ipmi.New(ipmi.Config{})
	h := serveAPI(t, engine.Config{Hostname: "test-conductor"}, []*engine.HardwareType{
		engine.NewFakeHardware(d), engine.NewIPMIHardware(ip, ip, ipmi.Properties()), engine.NewRedfishHardware(rf, redfish.Properties())})
	props := map[string]any{"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"}
	ipmiInfo := map[string]any{"ipmi_address": "127.0.0.1", "ipmi_password": "password", "ipmi_port": "7451", "ipmi_priv_level": "ADMINISTRATOR", "ipmi_username": "admin"}
	rfInfo := map[string]any{"redfish_address": "https://127.0.0.1:8000", "redfish_system_id": "/redfish/v1/Systems/1", "redfish_username": "admin", "redfish_password": "password"}
	bodies := map[string]map[string]any{
		"ipmi": {"driver": "ipmi", "boot_interface": "ipxe", "raid_interface": "no-raid", "driver_info": ipmiInfo},
		"redfish": {"driver": "redfish", "boot_interface": "ipxe", "firmware_interface": "redfish", "raid_interface": "redfish",
			"driver_info": rfInfo},
		"redfish-virtualmedia": {"driver": "redfish", "boot_interface": "redfish-virtual-media", "firmware_interface": "redfish",
			"raid_interface": "redfish", "driver_info": rfInfo},
	}
	n := 0
	for name, body := range bodies {
		for _, ver := range []string{"1.89", "1.95", "1.109", "1.110", latest} {
			n++
			b := map[string]any{"disable_power_off": false, "inspect_interface": "agent", "properties": props,
				"name": "metal3~" + strings.ReplaceAll(name, "-", "") + "-" + strings.ReplaceAll(ver, ".", "")}
			for k, v := range body {
				b[k] = v
			}
			r := h.do("POST", "/v1/nodes", ver, b)
			switch {
			case ver == "1.89":
				if r.status != http.StatusNotAcceptable {
					t.Errorf("%s at 1.89: %d %s, want 406", name, r.status, r.body)
				}
			case r.status == http.StatusCreated:
				if got := r.json(t)["disable_power_off"]; got != false {
					t.Errorf("%s at %s: disable_power_off %v", name, ver, got)
				}
			case r.status == http.StatusBadRequest && strings.Contains(r.faultstring(t), "interface"):
				t.Logf("%s at %s: %s", name, ver, r.faultstring(t))
			default:
				t.Errorf("%s at %s: %d %s", name, ver, r.status, r.body)
			}
		}
	}
	// BMO's ipmi host registers at every version from 1.95.
	r := h.do("POST", "/v1/nodes", "1.95", map[string]any{"disable_power_off": false, "driver": "ipmi", "boot_interface": "ipxe",
		"raid_interface": "no-raid", "inspect_interface": "agent", "driver_info": ipmiInfo, "properties": props, "name": "metal3~worker-0"})
	if r.status != http.StatusCreated {
		t.Fatalf("BMO's recorded ipmi create at 1.95: %d %s", r.status, r.body)
	}
}
