package inventory

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"castiron/ramdisk/protocol"
)

func ptr[T any](v T) *T { return &v }

func fakeRoot(tree string) Root {
	dir := filepath.Join("testdata", tree)
	return Root{
		Sys:     filepath.Join(dir, "sys"),
		Proc:    filepath.Join(dir, "proc"),
		Dev:     filepath.Join(dir, "dev"),
		BootMAC: "52:54:00:12:34:56",
		IPv4: func(name string) string {
			return map[string]string{"eth0": "10.203.0.17"}[name]
		},
	}
}

func TestCollect(t *testing.T) {
	tests := []struct {
		tree string
		want protocol.Inventory
	}{
		{
			tree: "full",
			want: protocol.Inventory{
				Interfaces: []protocol.Interface{
					{
						Name: "eth0", MACAddress: "52:54:00:12:34:56", IPV4Address: ptr("10.203.0.17"),
						HasCarrier: true, Vendor: ptr("0x1af4"), Product: ptr("0x0001"),
					},
					{
						Name: "eth1", MACAddress: "52:54:00:ab:cd:ef", HasCarrier: false,
						Vendor: ptr("0x8086"), Product: ptr("0x100e"), SpeedMbps: ptr(1000),
					},
				},
				CPU: protocol.CPU{
					ModelName: "Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz", Frequency: "2100",
					Count: 3, Architecture: "x86_64", SocketCount: 2,
					Flags: []string{"fpu", "vme", "de", "pse", "tsc", "msr", "pae", "lm"},
				},
				Disks: []protocol.Disk{
					{
						Name: "/dev/sda", Model: "QEMU HARDDISK", Size: 1 << 40, Rotational: true,
						WWN:                ptr("0x6001405ab12cd34e"),
						WWNWithExtension:   ptr("0x6001405ab12cd34ef0123456789abcde"),
						WWNVendorExtension: ptr("0xf0123456789abcde"),
						Serial:             ptr("SCSISERIAL01"), Vendor: ptr("QEMU"), HCTL: ptr("0:0:1:3"),
						ByPath:         ptr("/dev/disk/by-path/pci-0000:00:05.0-scsi-0:0:1:3"),
						LogicalSectors: 512, PhysicalSectors: 512,
					},
					{
						Name: "/dev/vda", Size: 20 << 30, Rotational: false,
						Serial: ptr("VIRTIO-SER-1"), Vendor: ptr("0x1af4"),
						LogicalSectors: 512, PhysicalSectors: 4096,
					},
				},
				Memory: protocol.Memory{Total: 492216 * 1024, PhysicalMB: 512},
				SystemVendor: protocol.SystemVendor{
					ProductName: "Standard PC (Q35 + ICH9, 2009)", SerialNumber: "SN-0042", Manufacturer: "QEMU",
					Firmware: protocol.Firmware{Vendor: "EFI Development Kit II / OVMF", Version: "0.0.0", BuildDate: "02/06/2015"},
				},
				Boot:     protocol.Boot{CurrentBootMode: "uefi", PXEInterface: "52:54:00:12:34:56"},
				Hostname: "node-7",
			},
		},
		{
			// No memory blocks, cpufreq, DMI or NICs: the fallbacks.
			tree: "minimal",
			want: protocol.Inventory{
				Interfaces: []protocol.Interface{},
				CPU: protocol.CPU{
					ModelName: "QEMU Virtual CPU version 2.5+", Frequency: "2096.008", Count: 1,
					Architecture: machine(Root{Proc: "/nonexistent"}), Flags: []string{"fpu", "de", "pse", "tsc"},
				},
				Disks:    []protocol.Disk{{Name: "/dev/vda", Size: 2 << 30, Rotational: true}},
				Memory:   protocol.Memory{Total: 492216 * 1024, PhysicalMB: 512}, // qemu -m 512
				Boot:     protocol.Boot{CurrentBootMode: "bios", PXEInterface: "52:54:00:12:34:56"},
				Hostname: "(none)",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.tree, func(t *testing.T) {
			got, err := Collect(context.Background(), fakeRoot(tt.tree))
			if err != nil {
				t.Fatalf("Collect: %v", err)
			}
			if !reflect.DeepEqual(*got, tt.want) {
				g, _ := json.MarshalIndent(got, "", " ")
				w, _ := json.MarshalIndent(tt.want, "", " ")
				t.Errorf("inventory mismatch\ngot:  %s\nwant: %s", g, w)
			}
		})
	}
}

// The JSON must keep Ironic's nulls: client_id, biosdevname, lldp, bmc_address.
func TestCollectJSONNulls(t *testing.T) {
	inv, err := Collect(context.Background(), fakeRoot("full"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(inv)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if v, ok := m["bmc_address"]; !ok || v != nil {
		t.Errorf("bmc_address = %v (present %v), want null", v, ok)
	}
	nic := m["interfaces"].([]any)[0].(map[string]any)
	for _, k := range []string{"client_id", "biosdevname", "lldp"} {
		if v, ok := nic[k]; !ok || v != nil {
			t.Errorf("interfaces[0].%s = %v (present %v), want null", k, v, ok)
		}
	}
}

func TestCollectIncomplete(t *testing.T) {
	root := Root{Sys: t.TempDir(), Proc: t.TempDir(), Dev: t.TempDir(), IPv4: func(string) string { return "" }}
	inv, err := Collect(context.Background(), root)
	if !errors.Is(err, ErrIncomplete) {
		t.Fatalf("err = %v, want ErrIncomplete", err)
	}
	if inv == nil || inv.Boot.CurrentBootMode != "bios" {
		t.Fatalf("partial inventory not returned: %+v", inv)
	}
}

func TestCollectCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Collect(ctx, fakeRoot("full")); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

// The running system must give a plausible inventory (smoke test of the
// real sysfs layout).
func TestCollectLive(t *testing.T) {
	inv, err := Collect(context.Background(), DefaultRoot())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	if inv.CPU.Count < 1 || inv.Memory.Total <= 0 || inv.Memory.PhysicalMB <= 0 || inv.CPU.Architecture == "" {
		t.Errorf("implausible live inventory: cpu %+v memory %+v", inv.CPU, inv.Memory)
	}
}
