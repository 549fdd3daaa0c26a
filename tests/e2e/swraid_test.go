//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// TestSoftwareRAID1 is software RAID through the agent raid interface on
// a VM with two disks: a manual clean with raid.create_configuration
// builds RAID-1 (metadata 1.0) from target_raid_config, raid_config and
// the root device come back, automated cleaning leaves the members alone,
// the deploy writes the image onto the array, the VM boots it from disk;
// on the host both disk files hold the image and an md superblock, and
// the VM boots again with only the second disk attached (the boot loader
// is on every member). Last, raid.delete_configuration removes the array.
func TestSoftwareRAID1(t *testing.T) {
	im := deployImagesFor(t)
	r := newDeployRig(t, "swraid1", LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1, Disks: []DiskSpec{
		{SizeGiB: 2, Serial: "E2EDISK0"}, {SizeGiB: 2, Serial: "E2EDISK1"},
	}}, im.Raw)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	uuid := r.node.UUID
	useAgentRAID(ctx, t, r)
	var drv map[string]any
	if err := r.c.Do(ctx, "GET", "/v1/drivers/ipmi", nil, &drv); err != nil || !strings.Contains(fmt.Sprint(drv["enabled_raid_interfaces"]), "agent") {
		t.Errorf("GET /v1/drivers/ipmi: enabled_raid_interfaces %v (%v), want agent among them", drv["enabled_raid_interfaces"], err)
	}
	// The API checks Ironic's schema at PUT; the software RAID rules are
	// the clean step's.
	bad := map[string]any{"logical_disks": []any{map[string]any{"size_gb": 1, "raid_level": "7", "controller": "software"}}}
	var apiErr *APIError
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/raid", bad, nil); !errors.As(err, &apiErr) || apiErr.Status != 400 {
		t.Errorf("PUT raid with raid_level 7: want 400, got %v", err)
	}

	// Manual clean: create_configuration in the agent.
	n := createRAID1Root(ctx, t, r, "swraid_create")
	raidConfig := n.field("raid_config")
	lds, _ := raidConfig["logical_disks"].([]any)
	if len(lds) != 1 || raidConfig["last_updated"] == nil {
		t.Fatalf("raid_config after create: %v", raidConfig)
	}
	ld, _ := lds[0].(map[string]any)
	if ld["raid_level"] != "1" || ld["controller"] != "software" {
		t.Errorf("raid_config logical disk: %v", ld)
	}
	hint, _ := n.Properties["root_device"].(map[string]any)
	if hint["name"] != "/dev/md/root" {
		t.Errorf("properties.root_device after create: %v (want the array, /dev/md/root)", n.Properties["root_device"])
	}
	if caps, _ := n.Properties["capabilities"].(string); !strings.Contains(caps, "raid_level:1") {
		t.Errorf("properties.capabilities: %q, want raid_level:1", caps)
	}
	t.Logf("raid_config: %v; root_device: %v", raidConfig, n.Properties["root_device"])
	r.waitVMOff(ctx, t, "after the RAID clean", 60*time.Second)
	for i := 0; i < 2; i++ {
		if err := requireMDMember(r.l.DiskPath(i), "any:root", 1); err != nil {
			t.Fatalf("disk %d after create_configuration: %v", i, err)
		}
	}

	// provide (automated cleaning must leave the RAID members alone), deploy.
	r.setImage(ctx, t, im.Raw, "")
	r.provide(ctx, t, true)
	r.waitVMOff(ctx, t, "after automated cleaning", 60*time.Second)
	run := r.deployTimed(ctx, t, "deploy_swraid1", true)
	r.checkDeployRecord(ctx, t, run)
	n, err := r.c.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	results, _ := n.DriverInternalInfo["agent_step_results"].(map[string]any)
	if wr, _ := results["deploy.write_image"].(map[string]any); wr["target_disk"] != "/dev/md/root" {
		t.Errorf("write_image wrote %v, want the RAID root /dev/md/root", wr["target_disk"])
	}
	// The VM is off (the image powers it off after its marker).
	for i := 0; i < 2; i++ {
		if err := DiskStartsWith(r.l.DiskPath(i), im.Raw.Path); err != nil {
			t.Errorf("disk %d does not mirror the image: %v", i, err)
		}
		if err := requireMDMember(r.l.DiskPath(i), "any:root", 1); err != nil {
			t.Errorf("disk %d after the deploy: %v", i, err)
		}
	}

	// The first disk pulled out: the second boots the image alone.
	if err := r.l.UseDisks(1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, args := range [][]string{{"chassis", "bootdev", "disk"}, {"chassis", "power", "on"}} {
		if out, err := r.l.Ipmitool(ctx, args...); err != nil {
			t.Fatalf("ipmitool %v: %v: %s", args, err, out)
		}
	}
	marker := r.waitMarker(ctx, t, start)
	t.Logf("E2E-TIMING swraid_second_disk_boot marker=%.2fs", marker.Sub(start).Seconds())
	if ev, ok := firstLine(r.l.VMEvents(), start, "start bootdev="); !ok || !strings.HasSuffix(ev.Text, " disks=E2EDISK1") {
		t.Errorf("the VM's start with the first disk pulled: %q, want only E2EDISK1 attached", ev.Text)
	} else {
		t.Logf("VM start: %s", ev.Text)
	}
	if err := r.l.UseDisks(); err != nil {
		t.Fatal(err)
	}

	// undeploy (automated cleaning again skips the members), then
	// delete_configuration in a manual clean.
	if err := r.c.SetProvisionState(ctx, uuid, "deleted"); err != nil {
		t.Fatalf("undeploy: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, uuid, "available", cleanTimeout); err != nil {
		t.Fatalf("undeploy: %v", err)
	}
	r.waitVMOff(ctx, t, "after undeploy", 60*time.Second)
	if err := r.c.SetProvisionState(ctx, uuid, "manage"); err != nil {
		t.Fatalf("manage: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, uuid, "manageable", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "clean",
		"clean_steps": []any{map[string]any{"interface": "raid", "step": "delete_configuration"}}}, nil); err != nil {
		t.Fatalf("clean: %v", err)
	}
	if n, err = r.c.WaitProvisionState(ctx, uuid, "manageable", cleanTimeout); err != nil {
		t.Fatalf("clean with raid.delete_configuration: %v", err)
	}
	if rc := n.field("raid_config"); len(rc) != 0 {
		t.Errorf("raid_config after delete_configuration: %v, want {}", rc)
	}
	if _, ok := n.Properties["root_device"]; ok {
		t.Errorf("properties.root_device after delete_configuration: %v, want none", n.Properties["root_device"])
	}
	r.waitVMOff(ctx, t, "after the RAID delete", 60*time.Second)
	for i := 0; i < 2; i++ {
		if err := requireMDMember(r.l.DiskPath(i), "", 0); err == nil || !strings.Contains(err.Error(), "no md superblock") {
			t.Errorf("disk %d after delete_configuration: want no md superblock, got %v", i, err)
		}
	}

	// The RAID built by the deploy itself: apply_configuration as a deploy
	// step before write_image (priority 90 > 80), the image onto its root.
	r.setImage(ctx, t, im.Raw, "") // undeploy cleared instance_info
	r.provide(ctx, t, true)
	r.waitVMOff(ctx, t, "after automated cleaning", 60*time.Second)
	target := raid1Root()
	target["logical_disks"].([]any)[0].(map[string]any)["volume_name"] = "os"
	start = time.Now()
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active",
		"deploy_steps": []any{map[string]any{"interface": "raid", "step": "apply_configuration", "priority": 90,
			"args": map[string]any{"raid_config": target}}}}, nil); err != nil {
		t.Fatalf("deploy with apply_configuration: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, uuid, "active", deployTimeout); err != nil {
		t.Fatalf("deploy with apply_configuration: %v", err)
	}
	r.waitMarker(ctx, t, start)
	t.Logf("E2E-TIMING deploy_swraid1_apply total=%.2fs", time.Since(start).Seconds())
	n, err = r.c.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	results, _ = n.DriverInternalInfo["agent_step_results"].(map[string]any)
	if wr, _ := results["deploy.write_image"].(map[string]any); wr["target_disk"] != "/dev/md/os" {
		t.Errorf("write_image after apply_configuration wrote %v, want /dev/md/os", wr["target_disk"])
	}
	if lds, _ := n.field("raid_config")["logical_disks"].([]any); len(lds) != 1 {
		t.Errorf("raid_config after apply_configuration: %v", n.field("raid_config"))
	}
	for i := 0; i < 2; i++ {
		if err := DiskStartsWith(r.l.DiskPath(i), im.Raw.Path); err != nil {
			t.Errorf("disk %d does not mirror the image: %v", i, err)
		}
		if err := requireMDMember(r.l.DiskPath(i), "any:os", 1); err != nil {
			t.Errorf("disk %d after apply_configuration: %v", i, err)
		}
	}
}

// requireMDMember reads the md 1.0 superblock at the end of a member's
// disk file (mdadm's placement: 8 KiB before the end, rounded down to
// 4 KiB) and checks its array name and level: the kernel's struct
// mdp_superblock_1, magic at 0, set_name at 32 (32 bytes), level at 72.
func requireMDMember(path, name string, level int32) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	off := ((st.Size()/512 - 16) &^ 7) * 512
	sb := make([]byte, 256)
	if _, err := f.ReadAt(sb, off); err != nil {
		return err
	}
	if binary.LittleEndian.Uint32(sb) != 0xa92b4efc {
		return fmt.Errorf("%s: no md superblock (metadata 1.0) at %d", path, off)
	}
	if major := binary.LittleEndian.Uint32(sb[4:]); major != 1 {
		return fmt.Errorf("%s: md superblock major version %d", path, major)
	}
	got := string(bytes.TrimRight(sb[32:64], "\x00"))
	lvl := int32(binary.LittleEndian.Uint32(sb[72:]))
	if got != name || lvl != level {
		return fmt.Errorf("%s: md superblock of array %q level %d, want %q level %d", path, got, lvl, name, level)
	}
	return nil
}

// TestSoftwareRAIDLevels builds the other levels on a VM with six disks,
// each configuration IPA's usual pair (RAID-1 for the OS, a second array
// beside it), picked by serial hints; a manual clean deletes the arrays
// before it creates the next ones. RAID-5 asked on two disks fails the
// clean with the reason and leaves no lock.
func TestSoftwareRAIDLevels(t *testing.T) {
	ramdiskDir(t)
	var disks []DiskSpec
	for i := 0; i < 6; i++ {
		disks = append(disks, DiskSpec{SizeGiB: 2, Serial: fmt.Sprintf("E2EDISK%d", i)})
	}
	r := newDeployRig(t, "swraid-levels", LabOptions{Boot: "bios", MemMB: 1024, CPUs: 1, Disks: disks})
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	uuid := r.node.UUID
	if _, err := r.c.PatchNode(ctx, uuid, PatchOp{Op: "replace", Path: "/raid_interface", Value: "agent"}); err != nil {
		t.Fatalf("raid_interface agent: %v", err)
	}
	serials := func(idx ...int) []any {
		var out []any
		for _, i := range idx {
			out = append(out, map[string]any{"serial": fmt.Sprintf("E2EDISK%d", i)})
		}
		return out
	}
	pair := func(level string, idx ...int) map[string]any {
		return map[string]any{"logical_disks": []any{
			map[string]any{"size_gb": 1, "raid_level": "1", "controller": "software", "is_root_volume": true,
				"volume_name": "root", "physical_disks": serials(0, 1)},
			map[string]any{"size_gb": 1, "raid_level": level, "controller": "software",
				"volume_name": "data", "physical_disks": serials(idx...)},
		}}
	}
	clean := func(cfg map[string]any, steps ...string) (*Node, error) {
		t.Helper()
		if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/raid", cfg, nil); err != nil {
			t.Fatalf("PUT raid: %v", err)
		}
		var plan []any
		for _, s := range steps {
			plan = append(plan, map[string]any{"interface": "raid", "step": s})
		}
		start := time.Now()
		if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "clean", "clean_steps": plan}, nil); err != nil {
			t.Fatalf("clean: %v", err)
		}
		n, err := r.c.WaitProvisionState(ctx, uuid, "manageable", cleanTimeout)
		r.waitVMOff(ctx, t, "after the clean", 60*time.Second)
		t.Logf("E2E-TIMING swraid_clean %v total=%.2fs", steps, time.Since(start).Seconds())
		return n, err
	}

	// RAID-5 on two disks: the agent refuses before touching a disk.
	n, err := clean(pair("5", 2, 3), "create_configuration")
	if err == nil || n == nil || n.ProvisionState != "clean failed" {
		t.Fatalf("RAID-5 on two disks: want clean failed, got %v", err)
	}
	if msg := n.LastErr(); !strings.Contains(msg, "not possible for RAID level 5 with only 2 block devices") {
		t.Errorf("last_error %q", msg)
	}
	r.c.WaitReleased(ctx, t, uuid, "after the refused RAID-5", 60*time.Second)
	t.Logf("RAID-5 on two disks: %s", n.LastErr())
	for i := 2; i < 4; i++ {
		if err := requireMDMember(r.l.DiskPath(i), "", 0); err == nil || !strings.Contains(err.Error(), "no md superblock") {
			t.Errorf("disk %d after the refused RAID-5: %v", i, err)
		}
	}
	if err := r.c.SetProvisionState(ctx, uuid, "manage"); err != nil {
		t.Fatalf("manage: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, uuid, "manageable", time.Minute); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		level   string
		mdLevel int32
		disks   []int
	}{
		{"5", 5, []int{2, 3, 4}},
		{"1+0", 10, []int{2, 3, 4, 5}},
		{"0", 0, []int{2, 3}},
	} {
		n, err := clean(pair(tc.level, tc.disks...), "delete_configuration", "create_configuration")
		if err != nil {
			t.Fatalf("RAID-1 + RAID-%s: %v", tc.level, err)
		}
		lds, _ := n.field("raid_config")["logical_disks"].([]any)
		if len(lds) != 2 {
			t.Errorf("RAID-1 + RAID-%s: raid_config %v", tc.level, n.field("raid_config"))
		}
		for _, i := range []int{0, 1} {
			if err := requireMDMember(r.l.DiskPath(i), "any:root", 1); err != nil {
				t.Errorf("RAID-1 + RAID-%s: %v", tc.level, err)
			}
		}
		for _, i := range tc.disks {
			if err := requireMDMember(r.l.DiskPath(i), "any:data", tc.mdLevel); err != nil {
				t.Errorf("RAID-1 + RAID-%s: %v", tc.level, err)
			}
		}
		t.Logf("RAID-1 on E2EDISK0-1 + RAID-%s on %v: raid_config %v", tc.level, tc.disks, lds)
	}
}

// useAgentRAID gives the rig's node the agent raid interface.
func useAgentRAID(ctx context.Context, t *testing.T, r *deployRig) {
	t.Helper()
	if _, err := r.c.PatchNode(ctx, r.node.UUID, PatchOp{Op: "replace", Path: "/raid_interface", Value: "agent"}); err != nil {
		t.Fatalf("raid_interface agent: %v", err)
	}
}

// createRAID1Root sets a RAID-1 root volume over every disk as the
// node's target and builds it with a manual clean (raid.create_configuration
// in the agent), timed as label; it answers the node once manageable.
func createRAID1Root(ctx context.Context, t *testing.T, r *deployRig, label string) *Node {
	t.Helper()
	uuid := r.node.UUID
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/raid", raid1Root(), nil); err != nil {
		t.Fatalf("PUT raid: %v", err)
	}
	start := time.Now()
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "clean",
		"clean_steps": []any{map[string]any{"interface": "raid", "step": "create_configuration"}}}, nil); err != nil {
		t.Fatalf("clean: %v", err)
	}
	n, err := r.c.WaitProvisionState(ctx, uuid, "manageable", cleanTimeout)
	if err != nil {
		t.Fatalf("clean with raid.create_configuration: %v", err)
	}
	t.Logf("E2E-TIMING %s total=%.2fs", label, time.Since(start).Seconds())
	return n
}

// raid1Root is a target_raid_config of one software RAID-1 root volume
// ("root", 1 GiB) over every disk.
func raid1Root() map[string]any {
	return map[string]any{"logical_disks": []any{map[string]any{
		"size_gb": 1, "raid_level": "1", "controller": "software", "is_root_volume": true, "volume_name": "root",
	}}}
}
