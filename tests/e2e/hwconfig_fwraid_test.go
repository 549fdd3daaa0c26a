//go:build e2e

package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestHardwareRAIDAndFirmwareUpdate: a redfish node behind castiron's own
// emulator driving a qemu VM (the virtual media rig, SeaBIOS), manual
// cleans without the ramdisk (the steps are the BMC's: the VM only power
// cycles): raid.create_configuration builds a volume from
// target_raid_config, firmware.update flashes the BMC and the BIOS from
// images castiron stages (checksums verified) and the BMC fetches from
// castiron, the BIOS one applied by a reboot of the VM; then
// raid.delete_configuration removes the volume. raid_config and GET
// /v1/nodes/{id}/firmware show the results.
func TestHardwareRAIDAndFirmwareUpdate(t *testing.T) {
	r := newSimVMediaRig(t, "bios")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	start := time.Now()
	r.enroll(ctx, t, "e2e-fwraid", "redfish")
	r.move(ctx, t, "manage", "manageable", 60*time.Second)

	// Images castiron hosts (instance images' directory), named bare.
	imgDir := filepath.Join(r.c.DataDir, "images")
	if err := os.MkdirAll(imgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	sum := map[string]string{}
	for name, img := range map[string]map[string]string{
		"fw-bmc.json":  {"Component": "BMC", "Version": "9.9.9-e2e"},
		"fw-bios.json": {"Component": "BIOS", "Version": "E2E BIOS 2"},
	} {
		b, _ := json.Marshal(img)
		if err := os.WriteFile(filepath.Join(imgDir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		s := sha256.Sum256(b)
		sum[name] = "sha256:" + hex.EncodeToString(s[:])
	}

	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+r.node.UUID+"/states/raid", map[string]any{"logical_disks": []any{
		map[string]any{"raid_level": "0", "size_gb": 2, "is_root_volume": true, "volume_name": "e2e-root"}}}, nil); err != nil {
		t.Fatal(err)
	}
	clean := func(steps ...map[string]any) time.Duration {
		t.Helper()
		s := time.Now()
		if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+r.node.UUID+"/states/provision",
			map[string]any{"target": "clean", "clean_steps": steps, "disable_ramdisk": true}, nil); err != nil {
			t.Fatal(err)
		}
		if _, err := r.c.WaitProvisionState(ctx, r.node.UUID, "manageable", 3*time.Minute); err != nil {
			t.Fatal(err)
		}
		return time.Since(s)
	}
	took := clean(
		map[string]any{"interface": "raid", "step": "create_configuration", "args": map[string]any{}},
		map[string]any{"interface": "firmware", "step": "update", "args": map[string]any{"settings": []any{
			map[string]any{"component": "bmc", "url": "fw-bmc.json", "checksum": sum["fw-bmc.json"]},
			map[string]any{"component": "bios", "url": "fw-bios.json", "checksum": sum["fw-bios.json"]},
		}}})
	t.Logf("clean (create RAID 0, flash BMC and BIOS with a reboot): %v", took.Round(time.Millisecond))

	var vols struct{ Members []map[string]any }
	r.bmc.get(t, "/redfish/v1/Systems/437XR1138R2/Storage/1/Volumes", &vols)
	if len(vols.Members) != 1 {
		t.Fatalf("volumes on the BMC: %v", vols.Members)
	}
	var sys struct{ BiosVersion string }
	r.bmc.get(t, "/redfish/v1/Systems/437XR1138R2", &sys)
	if sys.BiosVersion != "E2E BIOS 2" {
		t.Fatalf("BIOS version after the update and reboot: %q", sys.BiosVersion)
	}
	var node struct {
		RAIDConfig map[string]any `json:"raid_config"`
	}
	if err := r.c.Do(ctx, "GET", "/v1/nodes/"+r.node.UUID, nil, &node); err != nil {
		t.Fatal(err)
	}
	if lds, _ := node.RAIDConfig["logical_disks"].([]any); len(lds) != 1 || lds[0].(map[string]any)["raid_level"] != "0" {
		t.Fatalf("raid_config %v", node.RAIDConfig)
	}
	var fw struct{ Firmware []map[string]any }
	if err := r.c.Do(ctx, "GET", "/v1/nodes/"+r.node.UUID+"/firmware", nil, &fw); err != nil {
		t.Fatal(err)
	}
	got := map[string]any{}
	for _, c := range fw.Firmware {
		got[c["component"].(string)] = c["current_version"]
	}
	if got["bmc"] != "9.9.9-e2e" || got["bios"] != "E2E BIOS 2" {
		t.Fatalf("firmware components %v", fw.Firmware)
	}
	if left, _ := os.ReadDir(filepath.Join(imgDir, "firmware")); len(left) != 0 {
		t.Errorf("staged firmware left behind: %d files", len(left))
	}

	took = clean(map[string]any{"interface": "raid", "step": "delete_configuration", "args": map[string]any{}})
	t.Logf("clean (delete RAID): %v", took.Round(time.Millisecond))
	r.bmc.get(t, "/redfish/v1/Systems/437XR1138R2/Storage/1/Volumes", &vols)
	if len(vols.Members) != 0 {
		t.Fatalf("volumes after delete_configuration: %v", vols.Members)
	}
	t.Logf("whole test after the rig: %v", time.Since(start).Round(time.Millisecond))
}
