package inventory

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// smbiosDevice is an SMBIOS 2.8 type 17 structure (0x28 bytes, no strings)
// with the given Size word and Extended Size dword.
func smbiosDevice(size uint16, ext uint32) []byte {
	b := make([]byte, 0x28, 0x2A)
	b[0], b[1] = smbiosMemoryDevice, 0x28
	binary.LittleEndian.PutUint16(b[smbiosSizeOff:], size)
	binary.LittleEndian.PutUint32(b[smbiosExtSizeOff:], ext)
	return append(b, 0, 0)
}

func writeTree(t *testing.T, files map[string][]byte) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestMemorySMBIOS: the installed memory is the SMBIOS memory devices' sum
// (MiB, KiB and extended sizes; empty and unknown slots count nothing),
// ahead of the memory blocks, which on arm64 qemu count a block the UEFI
// varstore shares with RAM (9 x 128 MiB for a 1 GiB VM).
func TestMemorySMBIOS(t *testing.T) {
	files := map[string][]byte{
		"proc/meminfo": []byte("MemTotal:       1000000 kB\n"),
		"sys/devices/system/memory/block_size_bytes": []byte("8000000\n"),
	}
	for i := 0; i < 9; i++ {
		files[fmt.Sprintf("sys/devices/system/memory/memory%d/state", i)] = []byte("online\n")
	}
	dir := writeTree(t, files)
	root := Root{Proc: filepath.Join(dir, "proc"), Sys: filepath.Join(dir, "sys")}
	mem, err := readMemory(root)
	if err != nil || mem.PhysicalMB != 1152 {
		t.Fatalf("memory blocks only: %d MiB, %v; want 1152", mem.PhysicalMB, err)
	}

	entries := filepath.Join(dir, "sys/firmware/dmi/entries")
	for name, raw := range map[string][]byte{
		"17-0": smbiosDevice(1024, 0),         // 1 GiB in MiB
		"17-1": smbiosDevice(0, 0),            // empty slot
		"17-2": smbiosDevice(0xFFFF, 0),       // unknown
		"17-3": smbiosDevice(0x7FFF, 65536),   // 64 GiB, extended size
		"17-4": smbiosDevice(0x8000|16384, 0), // 16 MiB given in KiB
		"16-0": smbiosDevice(4096, 0)[:0x0F],  // another type: ignored
		"17-5": {smbiosMemoryDevice, 0x28, 0}, // truncated: ignored
	} {
		if name == "16-0" {
			raw[0] = 16
		}
		if err := os.MkdirAll(filepath.Join(entries, name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(entries, name, "raw"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mem, err = readMemory(root)
	if want := int64(1024 + 65536 + 16); err != nil || mem.PhysicalMB != want {
		t.Fatalf("with SMBIOS: %d MiB, %v; want %d", mem.PhysicalMB, err, want)
	}
}
