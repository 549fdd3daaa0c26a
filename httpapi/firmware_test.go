package httpapi

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"castiron/engine"
	"castiron/engine/driver/redfish"
	"castiron/engine/enginetest"
	"castiron/storage"
)

// TestNodeFirmware: GET /v1/nodes/{id}/firmware lists the cached
// components in Ironic's shapes: the four version fields by default
// (vendor, model, serial_number too from 1.114), created_at and updated_at
// always, every field with ?detail=True, the named ones with ?fields=.
func TestNodeFirmware(t *testing.T) {
	h, id := apiWithNode(t, map[string]any{"driver": "fake-hardware"})
	if err := h.store.SyncFirmwareComponents(context.Background(), id, []storage.FirmwareReading{
		{Component: "bmc", CurrentVersion: "1.0", Model: "Contoso BMC"},
		{Component: "bios", CurrentVersion: "A1"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := h.store.SyncFirmwareComponents(context.Background(), id, []storage.FirmwareReading{{Component: "bmc", CurrentVersion: "2.0", Model: "Contoso BMC"}}); err != nil {
		t.Fatal(err)
	}
	keys := func(m map[string]any) map[string]bool {
		out := map[string]bool{}
		for k := range m {
			out[k] = true
		}
		return out
	}
	list := func(ver, q string) []any {
		t.Helper()
		fw, _ := h.expect(200, "GET", "/v1/nodes/"+id+"/firmware"+q, ver, nil).json(t)["firmware"].([]any)
		return fw
	}
	fw := list("1.86", "")
	if len(fw) != 2 {
		t.Fatalf("%v", fw)
	}
	bios, bmc := fw[0].(map[string]any), fw[1].(map[string]any)
	if k := keys(bmc); len(k) != 6 || !k["created_at"] || !k["updated_at"] || !k["last_version_flashed"] || k["vendor"] {
		t.Fatalf("1.86 fields %v", bmc)
	}
	if bmc["component"] != "bmc" || bmc["initial_version"] != "1.0" || bmc["current_version"] != "2.0" || bmc["last_version_flashed"] != "2.0" || bmc["updated_at"] == nil {
		t.Fatalf("bmc %v", bmc)
	}
	if bios["last_version_flashed"] != nil || bios["updated_at"] != nil || bios["initial_version"] != "A1" {
		t.Fatalf("bios %v", bios)
	}
	if bmc := list("1.114", "")[1].(map[string]any); len(bmc) != 9 || bmc["model"] != "Contoso BMC" || bmc["vendor"] != nil {
		t.Fatalf("1.114 %v", bmc)
	}
	if bmc := list("1.86", "?detail=True")[1].(map[string]any); len(bmc) != 9 {
		t.Fatalf("detail %v", bmc)
	}
	if bmc := list("1.86", "?fields=component")[1].(map[string]any); len(bmc) != 3 || bmc["component"] != "bmc" {
		t.Fatalf("fields %v", bmc)
	}
	for _, c := range []struct{ ver, q, want string }{
		{"1.85", "", ""},
		{"1.113", "?fields=vendor", "require at least API version 1.114"},
		{"1.86", "?fields=bogus", `Field(s) "bogus" are not valid`},
		{"1.86", "?fields=component&detail=True", "Can not specify ?detail=True and fields"},
	} {
		r := h.do("GET", "/v1/nodes/"+id+"/firmware"+c.q, c.ver, nil)
		if r.status == 200 || (c.want != "" && !strings.Contains(r.faultstring(t), c.want)) {
			t.Fatalf("%s %s: %d %s", c.ver, c.q, r.status, r.body)
		}
	}
	h.expect(404, "GET", "/v1/nodes/nope/firmware", "1.86", nil)
}

// TestRedfishDriverFirmwareRAID: the redfish type lists firmware
// {redfish, no-firmware} and raid {redfish, no-raid, agent}, redfish the
// default of both (Ironic's type with every interface enabled), and a node
// created with BMO's interfaces gets them.
func TestRedfishDriverFirmwareRAID(t *testing.T) {
	rf := redfish.New(redfish.Config{Logger: enginetest.Quiet()})
	t.Cleanup(func() { _ = rf.Close(t.Context()) })
	h := serveAPI(t, engine.Config{Hostname: "test-conductor"}, []*engine.HardwareType{engine.NewRedfishHardware(rf, redfish.Properties())})
	d := h.expect(200, "GET", "/v1/drivers/redfish", latest, nil).json(t)
	if d["default_firmware_interface"] != "redfish" || d["default_raid_interface"] != "redfish" ||
		fmt.Sprint(d["enabled_firmware_interfaces"]) != "[redfish no-firmware]" || fmt.Sprint(d["enabled_raid_interfaces"]) != "[redfish no-raid agent]" {
		t.Fatalf("driver: %v %v %v %v", d["default_firmware_interface"], d["enabled_firmware_interfaces"], d["default_raid_interface"], d["enabled_raid_interfaces"])
	}
	n := h.createNode(map[string]any{"driver": "redfish", "firmware_interface": "redfish", "raid_interface": "redfish",
		"driver_info": map[string]any{"redfish_address": "https://127.0.0.1:8000", "redfish_username": "u", "redfish_password": "p"}})
	if n["firmware_interface"] != "redfish" || n["raid_interface"] != "redfish" {
		t.Fatalf("node %v %v", n["firmware_interface"], n["raid_interface"])
	}
}
