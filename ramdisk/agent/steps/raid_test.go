package steps

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"castiron/ramdisk/protocol"
)

// TestEraseSkipsRAIDMembers: erase_devices_metadata and erase_devices leave
// a disk holding an md superblock as it is (IPA's _is_linux_raid_member),
// and erase the others.
func TestEraseSkipsRAIDMembers(t *testing.T) {
	dir := t.TempDir()
	const size = 8 << 20
	member := make([]byte, size)
	for i := range member {
		member[i] = 0x5a
	}
	binary.LittleEndian.PutUint32(member[((size/512-16)&^7)*512:], 0xa92b4efc) // 1.0 superblock
	memberPath, plainPath := filepath.Join(dir, "member"), filepath.Join(dir, "plain")
	plain := bytes.Repeat([]byte{0x5a}, size)
	for p, b := range map[string][]byte{memberPath: member, plainPath: plain} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []string{protocol.StepEraseDevicesMetadata, protocol.StepEraseDevices} {
		res, err := runStep(t, context.Background(), testRunner(), step, map[string]any{"devices": []any{memberPath, plainPath}}, nil, nil)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		if skipped, _ := res["skipped"].([]string); len(skipped) != 1 || skipped[0] != memberPath {
			t.Errorf("%s: skipped %v, want the RAID member", step, res["skipped"])
		}
		got, _ := os.ReadFile(memberPath)
		if !bytes.Equal(got, member) {
			t.Errorf("%s wrote to the RAID member", step)
		}
		got, _ = os.ReadFile(plainPath)
		if got[0] != 0 {
			t.Errorf("%s did not erase the other disk", step)
		}
	}
}

// TestRAIDStepChecks: the agent checks the configuration as IPA does
// before anything else, and a ramdisk without mdadm says so.
func TestRAIDStepChecks(t *testing.T) {
	r := testRunner()
	r.md = nil
	inv := &protocol.Inventory{Disks: []protocol.Disk{{Name: "/dev/vda", Size: 8 << 30}, {Name: "/dev/vdb", Size: 8 << 30}}}
	run := func(name string, args map[string]any) error {
		_, err := r.run(context.Background(), protocol.Step{ID: "s1", Interface: "raid", Name: name, Args: args}, inv, nil)
		return err
	}
	bad := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "0", "size_gb": "MAX", "controller": "software"}}}
	if err := run("create_configuration", map[string]any{"target_raid_config": bad, "node_uuid": "n1"}); err == nil ||
		!strings.Contains(err.Error(), "Could not validate Software RAID config for n1: Software RAID Configuration requires RAID-1 for the first logical disk") {
		t.Errorf("RAID-0 first: %v", err)
	}
	if err := run("create_configuration", map[string]any{}); err == nil || !strings.Contains(err.Error(), "no target_raid_config") {
		t.Errorf("no config: %v", err)
	}
	good := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "controller": "software"}}}
	for _, name := range []string{"create_configuration", "apply_configuration", "delete_configuration"} {
		if err := run(name, map[string]any{"target_raid_config": good}); !errors.Is(err, errNoMdadm) {
			t.Errorf("%s without mdadm: %v", name, err)
		}
	}
	if err := run("bogus", nil); err == nil || !strings.Contains(err.Error(), "unknown step raid.bogus") {
		t.Errorf("unknown raid step: %v", err)
	}
	// write_image without mdadm sees the disks as they are.
	if got, err := r.rootCandidates(context.Background(), inv.Disks); err != nil || len(got) != 2 {
		t.Errorf("root candidates without mdadm: %v, %v", got, err)
	}
}
