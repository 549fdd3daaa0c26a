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
// the sum of online memory blocks, which counts the holes MemTotal misses.
func readMemory(root Root) (protocol.Memory, error) {
	var mem protocol.Memory
	total, err := memTotal(filepath.Join(root.Proc, "meminfo"))
	if err != nil {
		return mem, fmt.Errorf("memory: %w", err)
	}
	mem.Total = total
	if mb, ok := onlineBlocksMiB(filepath.Join(root.Sys, "devices/system/memory")); ok {
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
