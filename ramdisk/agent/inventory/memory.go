package inventory

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"castiron/ramdisk/protocol"
)

const (
	mib = 1 << 20
	// fallbackRoundMiB: without memory blocks, MemTotal (installed memory
	// minus what firmware and the kernel reserved) is rounded up to this,
	// which recovers the installed size of usual configurations (a
	// qemu -m 512 guest reports ~480 MiB).
	fallbackRoundMiB = 128
)

// readMemory returns MemTotal in bytes and the installed memory in MiB:
// the SMBIOS memory devices' sizes (what Ironic's agent reads with
// dmidecode), else the sum of online memory blocks, which counts the holes
// MemTotal misses but also any block firmware memory shares (arm64 qemu's
// UEFI varstore makes a 1 GiB VM 1152 MiB).
func readMemory(root Root) (protocol.Memory, error) {
	var mem protocol.Memory
	total, err := memTotal(filepath.Join(root.Proc, "meminfo"))
	if err != nil {
		return mem, fmt.Errorf("memory: %w", err)
	}
	mem.Total = total
	if mb, ok := smbiosMemoryMiB(filepath.Join(root.Sys, "firmware/dmi/entries")); ok {
		mem.PhysicalMB = mb
	} else if mb, ok := onlineBlocksMiB(filepath.Join(root.Sys, "devices/system/memory")); ok {
		mem.PhysicalMB = mb
	} else {
		totalMiB := (total + mib - 1) / mib
		mem.PhysicalMB = (totalMiB + fallbackRoundMiB - 1) / fallbackRoundMiB * fallbackRoundMiB
	}
	return mem, nil
}

func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal %q: %w", fields[1], err)
			}
			return kb * 1024, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no MemTotal in %s", path)
}

// onlineBlocksMiB sums the online memoryN blocks; ok is false when the
// directory or its block size is missing (no memory hotplug support).
func onlineBlocksMiB(dir string) (int64, bool) {
	blockSize, err := strconv.ParseInt(readLine(filepath.Join(dir, "block_size_bytes")), 16, 64)
	if err != nil || blockSize <= 0 {
		return 0, false
	}
	blocks, err := filepath.Glob(filepath.Join(dir, "memory[0-9]*"))
	if err != nil || len(blocks) == 0 {
		return 0, false
	}
	var online int64
	for _, b := range blocks {
		if readLine(filepath.Join(b, "state")) == "online" {
			online++
		}
	}
	return online * blockSize / mib, online > 0
}

// SMBIOS memory device (type 17) fields (DMTF DSP0134): Size, a word at
// 0x0C (0: empty slot, 0xFFFF: unknown, bit 15: KiB instead of MiB, 0x7FFF:
// see Extended Size), and Extended Size, a dword in MiB at 0x1C.
const (
	smbiosMemoryDevice = 17
	smbiosSizeOff      = 0x0C
	smbiosExtSizeOff   = 0x1C
)

// smbiosMemoryMiB sums the sizes of the SMBIOS memory devices the kernel
// exports (entries/17-N/raw); ok is false when there are none with a size.
func smbiosMemoryMiB(dir string) (int64, bool) {
	raws, err := filepath.Glob(filepath.Join(dir, fmt.Sprintf("%d-*", smbiosMemoryDevice), "raw"))
	if err != nil || len(raws) == 0 {
		return 0, false
	}
	var sum int64
	for _, path := range raws {
		b, err := os.ReadFile(path)
		if err != nil || len(b) < smbiosSizeOff+2 || b[0] != smbiosMemoryDevice || int(b[1]) > len(b) {
			continue
		}
		size := int64(b[smbiosSizeOff]) | int64(b[smbiosSizeOff+1])<<8
		switch {
		case size == 0 || size == 0xFFFF:
		case size == 0x7FFF && int(b[1]) >= smbiosExtSizeOff+4:
			ext := b[smbiosExtSizeOff : smbiosExtSizeOff+4]
			sum += int64(ext[0]) | int64(ext[1])<<8 | int64(ext[2])<<16 | int64(ext[3]&0x7F)<<24
		case size&0x8000 != 0:
			sum += (size &^ 0x8000) / 1024
		default:
			sum += size
		}
	}
	return sum, sum > 0
}
