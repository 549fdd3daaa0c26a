package engine

import (
	"bytes"
	"testing"

	"castiron/ramdisk/configdrive"
	"castiron/storage"
)

// The node's network_data reaches the deployed OS's config drive: into a
// JSON config drive without network data, and as a config drive of its own
// when the deploy has none; a config drive's own network data wins.
func TestConfigDriveNetworkData(t *testing.T) {
	nodeND := storage.JSONObject{"links": []any{map[string]any{"id": "p0", "type": "phy", "ethernet_mac_address": "52:54:00:aa:bb:cc"}},
		"networks": []any{map[string]any{"id": "n0", "type": "ipv4", "link": "p0", "ip_address": "10.9.8.7", "netmask": "255.255.255.0"}}}
	node := &storage.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", NetworkData: nodeND}
	own := map[string]any{"links": []any{}, "networks": []any{map[string]any{"id": "x", "type": "ipv4_dhcp", "link": "p9"}}}
	for _, tc := range []struct {
		name     string
		cd       any
		node, nd bool // expect the node's network data; expect any network_data.json
	}{
		{"none", nil, true, true},
		{"json without network_data", map[string]any{"meta_data": map[string]any{"hostname": "h"}}, true, true},
		{"json with empty network_data", map[string]any{"network_data": map[string]any{}}, true, true},
		{"json with its own network_data", map[string]any{"network_data": own}, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arg, err := configDriveArg(node, tc.cd)
			if err != nil {
				t.Fatal(err)
			}
			iso, err := configdrive.Decode([]byte(arg))
			if err != nil {
				t.Fatal(err)
			}
			if got := bytes.Contains(iso, []byte(`"ip_address":"10.9.8.7"`)); got != tc.node {
				t.Errorf("node's network data in the config drive: %v, want %v", got, tc.node)
			}
			if got := bytes.Contains(iso, []byte("NETWORK_DATA")) || bytes.Contains(iso, []byte("network_data.json")); got != tc.nd {
				t.Errorf("network_data.json present: %v, want %v", got, tc.nd)
			}
		})
	}
	// A node without network data and no config drive gets none.
	if arg, err := configDriveArg(&storage.Node{UUID: node.UUID}, nil); err != nil || arg != "" {
		t.Errorf("no network data, no config drive: %q %v", arg, err)
	}
}
