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

// readCPU summarises /proc/cpuinfo. Count is the number of logical CPUs
// (Ironic's "cpus" property); Frequency prefers cpufreq's maximum, which is
// the nominal speed, over cpuinfo's current clock.
func readCPU(root Root) (protocol.CPU, error) {
	cpu := protocol.CPU{Architecture: machine(root), Flags: []string{}}
	f, err := os.Open(filepath.Join(root.Proc, "cpuinfo"))
	if err != nil {
		return cpu, fmt.Errorf("cpu: %w", err)
	}
	defer f.Close()

	sockets := map[string]bool{}
	var currentMHz string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024) // flags lines are long
	for sc.Scan() {
		key, value, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch key {
		case "processor":
			cpu.Count++
		case "model name":
			if cpu.ModelName == "" {
				cpu.ModelName = value
			}
		case "cpu MHz":
			if currentMHz == "" {
				currentMHz = value
			}
		case "flags", "Features": // Features on arm64
			if len(cpu.Flags) == 0 {
				cpu.Flags = strings.Fields(value)
			}
		case "physical id":
			sockets[value] = true
		}
	}
	if err := sc.Err(); err != nil {
		return cpu, fmt.Errorf("cpu: %w", err)
	}
	cpu.SocketCount = len(sockets)
	cpu.Frequency = currentMHz
	if khz, err := strconv.ParseFloat(readLine(filepath.Join(root.Sys, "devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")), 64); err == nil && khz > 0 {
		cpu.Frequency = strconv.FormatFloat(khz/1000, 'f', -1, 64)
	}
	return cpu, nil
}
