package storage

import (
	"context"
	"testing"
)

// Firmware components sync as Ironic's cache_firmware_components: created
// with initial_version, a changed version moves to last_version_flashed,
// unread components stay, and the rows go with their node.
func TestFirmwareComponents(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "a")
	a := nodes[0]
	if got, err := s.ListFirmwareComponents(ctx, a.UUID); err != nil || len(got) != 0 {
		t.Fatalf("%v %v", got, err)
	}
	if err := s.SyncFirmwareComponents(ctx, a.UUID, []FirmwareReading{
		{Component: "bmc", CurrentVersion: "1.0", Model: "M"},
		{Component: "bios", CurrentVersion: "A1"},
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.SyncFirmwareComponents(ctx, a.UUID, []FirmwareReading{{Component: "bmc", CurrentVersion: "2.0", Model: "M", SerialNumber: "S"}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ListFirmwareComponents(ctx, a.UUID)
	if err != nil || len(got) != 2 {
		t.Fatalf("%v %v", got, err)
	}
	bios, bmc := got[0], got[1]
	if bios.Component != "bios" || bios.InitialVersion != "A1" || *bios.CurrentVersion != "A1" || bios.LastVersionFlashed != nil || bios.Vendor != nil || bios.UpdatedAt != nil {
		t.Fatalf("bios %+v", bios)
	}
	if bmc.InitialVersion != "1.0" || *bmc.CurrentVersion != "2.0" || *bmc.LastVersionFlashed != "2.0" || *bmc.SerialNumber != "S" || bmc.UpdatedAt == nil {
		t.Fatalf("bmc %+v", bmc)
	}
	if err := s.DeleteNode(ctx, a.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ListFirmwareComponents(ctx, a.UUID); err == nil {
		t.Fatal("components of a deleted node")
	}
	if err := s.SyncFirmwareComponents(ctx, a.UUID, []FirmwareReading{{Component: "bmc", CurrentVersion: "1"}}); err == nil {
		t.Fatal("sync of a deleted node")
	}
}
