package engine

import (
	"castiron/fault"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/rootdevice"
	"castiron/storage"
)

// rootDisk picks the root disk as Ironic does: the disk matching the root
// device hints, else the smallest disk of at least 4 GiB.
func rootDisk(disks []protocol.Disk, hints map[string]any) (protocol.Disk, error) {
	return rootdevice.Select(disks, hints, minRootDiskBytes)
}

// checkRootDeviceHints refuses properties.root_device that Ironic would
// refuse (unknown hints, bad values, bad operators).
func checkRootDeviceHints(n *storage.Node) error {
	v, ok := n.Properties["root_device"]
	if !ok || v == nil {
		return nil
	}
	hints, ok := v.(map[string]any)
	if !ok {
		return fault.New(fault.Invalid, "Root device hints must be a dictionary, got %T", v)
	}
	if err := rootdevice.Validate(hints); err != nil {
		return fault.New(fault.Invalid, "%s", err.Error())
	}
	return nil
}
