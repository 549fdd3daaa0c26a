package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"castiron/ramdisk/protocol"
)

// arphrdEther is /sys/class/net/X/type for Ethernet.
const arphrdEther = "1"

// readInterfaces lists physical Ethernet NICs: those with a device link
// (virtual ones such as bridges or ifb have none), as IPA does.
func readInterfaces(root Root) ([]protocol.Interface, error) {
	netDir := filepath.Join(root.Sys, "class/net")
	entries, err := os.ReadDir(netDir)
	if err != nil {
		return []protocol.Interface{}, fmt.Errorf("interfaces: %w", err)
	}
	nics := []protocol.Interface{}
	for _, e := range entries {
		name := e.Name()
		dir := filepath.Join(netDir, name)
		if readLine(filepath.Join(dir, "type")) != arphrdEther || !exists(filepath.Join(dir, "device")) {
			continue
		}
		nic := protocol.Interface{
			Name:        name,
			MACAddress:  readLine(filepath.Join(dir, "address")),
			IPV4Address: optional(root.IPv4(name)),
			// carrier reads EINVAL while the link is down: no carrier.
			HasCarrier: readLine(filepath.Join(dir, "carrier")) == "1",
			Vendor:     optional(readLine(filepath.Join(dir, "device/vendor"))),
			Product:    optional(readLine(filepath.Join(dir, "device/device"))),
		}
		if speed, err := strconv.Atoi(readLine(filepath.Join(dir, "speed"))); err == nil && speed > 0 {
			nic.SpeedMbps = &speed
		}
		nics = append(nics, nic)
	}
	return nics, nil
}
