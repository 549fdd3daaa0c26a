package engine

import (
	"encoding/json"
	"testing"

	"castiron/storage"
)

// TestInspectionHooks: plugin_data as Ironic's hooks write it, from a
// ramdisk report as posted: the boot NIC pxe_enabled, a NIC without a
// valid MAC or name left out, lo in all_interfaces but not valid, the
// IPv6 scope cut, LLDP raw and parsed, root_disk by the node's hints; a
// ramdisk's own lldp_raw wins over the inventory's.
func TestInspectionHooks(t *testing.T) {
	body := `{"inventory": {"interfaces": [
		{"name": "eth0", "mac_address": "52:54:00:AA:00:01", "ipv4_address": "192.0.2.5", "ipv6_address": "fe80::1%eth0",
		 "lldp": [[1, "04001122aabbcc"], [2, "0565746831"], [3, "0078"]]},
		{"name": "eth1", "mac_address": "52:54:00:aa:00:02", "lldp": null},
		{"name": "lo", "mac_address": "00:00:00:00:00:00", "ipv4_address": "127.0.0.1"},
		{"name": "bad", "mac_address": "nope"},
		{"name": "", "mac_address": "52:54:00:aa:00:09"}],
	  "disks": [{"name": "/dev/sda", "size": 8589934592}, {"name": "/dev/sdb", "size": 68719476736}],
	  "boot": {"current_boot_mode": "uefi", "pxe_interface": "52:54:00:aa:00:01"}},
	 "boot_interface": "01-52-54-00-aa-00-01"}`
	in, err := ParseInspection([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	n := &storage.Node{Properties: storage.JSONObject{"root_device": map[string]any{"name": "/dev/sdb"}}}
	plugin := map[string]any{"boot_interface": in.PluginData["boot_interface"]}
	inspectionHooks(n, in, plugin)
	b, _ := json.Marshal(plugin)
	var got struct {
		All   map[string]map[string]any `json:"all_interfaces"`
		Valid map[string]any            `json:"valid_interfaces"`
		MACs  []string                  `json:"macs"`
		Raw   map[string][][2]any       `json:"lldp_raw"`
		LLDP  map[string]map[string]any `json:"parsed_lldp"`
		Root  map[string]any            `json:"root_disk"`
		Boot  string                    `json:"boot_interface"`
	}
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	if len(got.All) != 3 || got.All["eth0"]["pxe_enabled"] != true || got.All["eth1"]["pxe_enabled"] != false ||
		got.All["eth0"]["mac_address"] != "52:54:00:aa:00:01" || got.All["eth0"]["ipv6_address"] != "fe80::1" {
		t.Fatalf("all_interfaces %s", b)
	}
	if _, ok := got.Valid["lo"]; ok || len(got.Valid) != 2 || len(got.MACs) != 2 {
		t.Fatalf("valid_interfaces/macs %s", b)
	}
	if len(got.Raw) != 1 || len(got.Raw["eth0"]) != 3 || got.LLDP["eth0"]["switch_port_id"] != "eth1" || got.LLDP["eth0"]["switch_chassis_id"] != "00:11:22:aa:bb:cc" {
		t.Fatalf("lldp %s", b)
	}
	if got.Root["name"] != "/dev/sdb" || got.Boot != "01-52-54-00-aa-00-01" {
		t.Fatalf("root_disk/boot_interface %s", b)
	}

	own := map[string]any{"lldp_raw": map[string]any{"eth1": []any{[]any{2.0, "0565746839"}}}}
	inspectionHooks(&storage.Node{Properties: storage.JSONObject{}}, in, own)
	parsed, _ := own["parsed_lldp"].(map[string]any)
	if len(parsed) != 1 || parsed["eth1"].(map[string]any)["switch_port_id"] != "eth9" {
		t.Fatalf("the ramdisk's lldp_raw: parsed %v", parsed)
	}
	if rd, _ := own["root_disk"].(map[string]any); rd["name"] != "/dev/sda" {
		t.Fatalf("root_disk without hints %v, want the smallest disk of 4 GiB or more", own["root_disk"])
	}
}
