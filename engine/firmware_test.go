package engine

import (
	"strings"
	"testing"
	"time"

	"castiron/engine/driver"
	"castiron/storage"
)

// firmware.update's settings: Ironic's schema (component bios/bmc/nic:*,
// url, wait; nothing else) plus castiron's checksum.
func TestParseFirmwareSettings(t *testing.T) {
	ok := []any{
		map[string]any{"component": "bmc", "url": "http://x/bmc.bin", "wait": float64(30)},
		map[string]any{"component": "nic:ABC123", "url": "nic.bin", "checksum": strings.Repeat("a", 64)},
		map[string]any{"component": "bios", "url": "https://x/b", "checksum": "sha512:" + strings.Repeat("b", 128)},
	}
	ups, err := parseFirmwareSettings(ok)
	if err != nil || len(ups) != 3 || ups[1].Component != "nic:ABC123" || ups[2].Checksum == "" {
		t.Fatalf("%+v %v", ups, err)
	}
	for _, c := range []struct {
		in   any
		want string
	}{
		{[]any{}, "Invalid firmware update []. Errors: [] should be non-empty"},
		{"bmc", "Invalid firmware update"},
		{[]any{map[string]any{"component": "raid", "url": "u"}}, "Invalid firmware update"},
		{[]any{map[string]any{"component": "bmc"}}, "'url' is a required property"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "size": 1}}, "Additional properties are not allowed ('size' was unexpected)"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "wait": float64(0)}}, "is less than the minimum of 1"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "checksum": "crc32:1234"}}, "Invalid firmware checksum"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "checksum": "sha256:abc"}}, "not a sha256 digest"},
		{[]any{map[string]any{"component": "bmc", "url": "u", "checksum": "abc"}}, "Invalid firmware checksum"},
	} {
		_, err := parseFirmwareSettings(c.in)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.in, err, c.want)
		}
	}
}

// raid_config as Ironic's update_raid_info writes it: the logical disks,
// last_updated; a root volume sets local_gb and the raid_level capability.
func TestRAIDConfigOf(t *testing.T) {
	n := &storage.Node{Properties: storage.JSONObject{"capabilities": "boot_mode:uefi"}}
	raidConfigOf(n, []driver.LogicalDisk{
		{ID: "Volume1", Name: "os", Controller: "1", SizeGB: 100, RAIDLevel: "1", IsRootVolume: true},
		{ID: "Volume2", Controller: "1", SizeGB: 800, RAIDLevel: "5"},
	}, time.Date(2026, 11, 28, 12, 0, 0, 5000, time.UTC))
	lds := n.RAIDConfig["logical_disks"].([]any)
	if len(lds) != 2 || n.RAIDConfig["last_updated"] != "2026-11-28 12:00:00.000005" || lds[1].(map[string]any)["name"] != nil {
		t.Fatalf("%v", n.RAIDConfig)
	}
	if n.Properties["local_gb"] != int64(100) || n.Properties["capabilities"] != "boot_mode:uefi,raid_level:1" {
		t.Fatalf("%v", n.Properties)
	}
	raidConfigOf(n, nil, time.Now())
	if lds := n.RAIDConfig["logical_disks"].([]any); len(lds) != 0 {
		t.Fatalf("%v", n.RAIDConfig)
	}
}
