package engine

import (
	"fmt"

	"castiron/ramdisk/protocol"
)

// rootDisk picks the root disk as Ironic does: the disk matching the root
// device hints, else the smallest disk of at least 4 GiB.
func rootDisk(disks []protocol.Disk, hints map[string]any) (protocol.Disk, error) {
	var best *protocol.Disk
	for i := range disks {
		d := &disks[i]
		if d.Size < minRootDiskBytes {
			continue
		}
		if best == nil || d.Size < best.Size {
			best = d
		}
	}
	if best == nil {
		return protocol.Disk{}, fmt.Errorf("no disk of at least 4 GiB")
	}
	_ = hints // root device hints: wired to ramdisk/rootdevice
	return *best, nil
}
