package httpapi

import (
	"context"
	"strings"
	"testing"

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
