package inventory

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"castiron/ramdisk/protocol"
)

// skippedDiskPrefixes are block devices that are not disks one could
// install on: loop, RAM disks, optical and floppy drives, device-mapper
// targets (md RAID devices are kept, as IPA does).
var skippedDiskPrefixes = []string{"loop", "ram", "zram", "sr", "fd", "dm-"}

var hctlPattern = regexp.MustCompile(`^\d+:\d+:\d+:\d+$`)

// readDisks lists /sys/block. Sizes in /sys/block/X/size are always in
// 512-byte units, whatever the device's sector size.
func readDisks(root Root) ([]protocol.Disk, error) {
	blockDir := filepath.Join(root.Sys, "block")
	entries, err := os.ReadDir(blockDir)
	if err != nil {
		return []protocol.Disk{}, fmt.Errorf("disks: %w", err)
	}
	byPath := diskLinks(filepath.Join(root.Dev, "disk/by-path"))
	disks := []protocol.Disk{}
	for _, e := range entries {
		name := e.Name()
		if skippedDisk(name) {
			continue
		}
		dir := filepath.Join(blockDir, name)
		sectors, err := strconv.ParseInt(readLine(filepath.Join(dir, "size")), 10, 64)
		if err != nil || sectors == 0 { // empty drives, unconfigured nbd
			continue
		}
		dev := filepath.Join(dir, "device")
		d := protocol.Disk{
			Name:       "/dev/" + strings.ReplaceAll(name, "!", "/"), // cciss!c0d0
			Model:      readLine(filepath.Join(dev, "model")),
			Size:       sectors * 512,
			Rotational: readLine(filepath.Join(dir, "queue/rotational")) == "1",
			Vendor:     optional(readLine(filepath.Join(dev, "vendor"))),
			Serial:     optional(diskSerial(dir)),
			HCTL:       optional(hctl(dev)),
			ByPath:     optional(byPath[name]),
		}
		d.LogicalSectors, _ = strconv.Atoi(readLine(filepath.Join(dir, "queue/logical_block_size")))
		d.PhysicalSectors, _ = strconv.Atoi(readLine(filepath.Join(dir, "queue/physical_block_size")))
		setWWN(&d, dir)
		disks = append(disks, d)
	}
	return disks, nil
}

func skippedDisk(name string) bool {
	for _, p := range skippedDiskPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// diskSerial: virtio-blk has block/X/serial, NVMe device/serial, SCSI
// disks only the unit serial number VPD page (0x80).
func diskSerial(dir string) string {
	if s := readLine(filepath.Join(dir, "serial")); s != "" {
		return s
	}
	if s := readLine(filepath.Join(dir, "device/serial")); s != "" {
		return s
	}
	return vpdSerial(filepath.Join(dir, "device/vpd_pg80"))
}

// vpdSerial decodes VPD page 0x80: a 4-byte header whose last byte is the
// length, then the ASCII serial number.
func vpdSerial(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 4 || b[1] != 0x80 {
		return ""
	}
	n := int(b[3])
	if 4+n > len(b) {
		n = len(b) - 4
	}
	return strings.TrimSpace(strings.TrimRight(string(b[4:4+n]), "\x00"))
}

// setWWN fills the WWN fields as udev's ID_WWN, ID_WWN_WITH_EXTENSION and
// ID_WWN_VENDOR_EXTENSION would (what Ironic root device hints compare
// against): an NAA identifier's first 8 bytes as 0x-hex, the extension being
// the remaining 8 bytes of a 16-byte (NAA type 6) identifier.
func setWWN(d *protocol.Disk, dir string) {
	wwid := readLine(filepath.Join(dir, "device/wwid"))
	if wwid == "" {
		wwid = readLine(filepath.Join(dir, "wwid"))
	}
	hex, ok := strings.CutPrefix(wwid, "naa.")
	if !ok {
		if strings.HasPrefix(wwid, "eui.") { // NVMe: udev keeps it as is
			d.WWN, d.WWNWithExtension = optional(wwid), optional(wwid)
		}
		return
	}
	hex = strings.ToLower(hex)
	switch {
	case len(hex) == 16:
		d.WWN, d.WWNWithExtension = optional("0x"+hex), optional("0x"+hex)
	case len(hex) == 32:
		d.WWN = optional("0x" + hex[:16])
		d.WWNVendorExtension = optional("0x" + hex[16:])
		d.WWNWithExtension = optional("0x" + hex)
	}
}

// hctl is the SCSI address Host:Channel:Target:Lun, the name of the SCSI
// device the disk's device link points to.
func hctl(deviceLink string) string {
	target, err := os.Readlink(deviceLink)
	if err != nil {
		return ""
	}
	if base := filepath.Base(target); hctlPattern.MatchString(base) {
		return base
	}
	return ""
}

// diskLinks maps a block device name to its /dev/disk/by-path link. The
// ramdisk has no udev, so the directory is normally absent.
func diskLinks(dir string) map[string]string {
	links := map[string]string{}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return links
	}
	for _, e := range entries {
		target, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue
		}
		dev := filepath.Base(target)
		if _, taken := links[dev]; !taken {
			links[dev] = filepath.Join("/dev/disk/by-path", e.Name())
		}
	}
	return links
}
