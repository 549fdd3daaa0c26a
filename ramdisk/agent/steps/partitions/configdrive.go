package partitions

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"

	"castiron/ramdisk/agent/steps/blockdev"
)

// ConfigDriveSize is the partition Ironic's agent makes for a config drive
// at the end of the disk (MAX_CONFIG_DRIVE_SIZE_MB); a smaller one, of the
// image's size in whole MiB, is made when less room is left.
const ConfigDriveSize = 64 << 20

// ConfigDriveLabel is the file system label of a config drive, also given
// as the GPT partition name.
const ConfigDriveLabel = "config-2"

// ErrNoPartitionTable: a config drive partition needs the image to have a
// partition table.
var ErrNoPartitionTable = errors.New("the image has no partition table, so no config drive partition can be added")

const mib = 1 << 20

// ConfigDrive returns the partition the config drive goes in: one the image
// already has (a file system labelled config-2 or a GPT partition named so)
// if big enough, else a new one at the end of the disk, GPT or MBR as the
// image is. A GPT whose backup is not at the end of the disk (an image
// smaller than the disk) is moved there first, as sgdisk -e does. created
// tells whether the table was changed.
func ConfigDrive(dev *blockdev.Device, isoSize int64) (p Partition, created bool, err error) {
	size, ss := dev.Size(), int64(dev.SectorSize())
	t := Read(dev, size, int(ss))
	if t.Kind == "" {
		return Partition{}, false, ErrNoPartitionTable
	}
	var found []Partition
	for _, p := range t.Partitions {
		if strings.EqualFold(p.Name, ConfigDriveLabel) || isConfigDriveFS(dev, p) {
			found = append(found, p)
		}
	}
	switch {
	case len(found) > 1:
		return Partition{}, false, fmt.Errorf("More than one partition with label %q exists on device %s: partitions %d and %d", ConfigDriveLabel, dev.Path(), found[0].Number, found[1].Number)
	case len(found) == 1:
		if found[0].Size < isoSize {
			return Partition{}, false, fmt.Errorf("the config drive partition %d on %s has %d bytes, the config drive needs %d", found[0].Number, dev.Path(), found[0].Size, isoSize)
		}
		return found[0], false, nil
	}
	bk := file.New(dev.File(), false)
	w, err := bk.Writable()
	if err != nil {
		return Partition{}, false, err
	}
	if t.Kind == "gpt" {
		p, err = addGPT(dev, w, isoSize)
	} else {
		p, err = addMBR(dev, w, isoSize)
	}
	if err != nil {
		return Partition{}, false, err
	}
	return p, true, nil
}

// placement picks the first sector of a partition ending at last: 64 MiB
// before the end, or the image's size when that overlaps what is there,
// aligned up to 1 MiB (as sgdisk and parted align).
func placement(dev *blockdev.Device, last, usedEnd, isoSize int64) (int64, error) {
	ss := int64(dev.SectorSize())
	align := mib / ss
	for _, want := range []int64{ConfigDriveSize, (isoSize + mib - 1) / mib * mib} {
		start := (last + 1 - want/ss + align - 1) / align * align
		if start > usedEnd && start <= last && (last-start+1)*ss >= isoSize {
			return start, nil
		}
	}
	return 0, fmt.Errorf("no room for a %d MiB config drive partition after the last partition of %s", (isoSize+mib-1)/mib, dev.Path())
}

func addGPT(dev *blockdev.Device, w backend.WritableFile, isoSize int64) (Partition, error) {
	ss := dev.SectorSize()
	table, err := gpt.Read(w, ss, ss)
	if err != nil {
		return Partition{}, fmt.Errorf("reading the GPT of %s: %w", dev.Path(), err)
	}
	if table.Verify(w, uint64(dev.Size())) != nil {
		if err := table.Repair(uint64(dev.Size())); err != nil {
			return Partition{}, fmt.Errorf("moving the backup GPT of %s to its end: %w", dev.Path(), err)
		}
	}
	last := int64(table.LastDataSector())
	var usedEnd int64
	used := map[int]bool{}
	for _, p := range table.Partitions {
		if p.Type == gpt.Unused {
			continue
		}
		usedEnd = max(usedEnd, int64(p.End))
		used[p.Index] = true
	}
	start, err := placement(dev, last, usedEnd, isoSize)
	if err != nil {
		return Partition{}, err
	}
	index := 1
	for used[index] {
		index++
	}
	table.Partitions = append(table.Partitions, &gpt.Partition{
		Index: index, Start: uint64(start), End: uint64(last), Type: gpt.LinuxFilesystem, Name: ConfigDriveLabel,
	})
	if err := table.Write(w, dev.Size()); err != nil {
		return Partition{}, fmt.Errorf("writing the GPT of %s: %w", dev.Path(), err)
	}
	return Partition{Number: index, Start: start * int64(ss), Size: (last - start + 1) * int64(ss), Type: string(gpt.LinuxFilesystem), Name: ConfigDriveLabel}, nil
}

// mbrMaxSectors: MBR entries address 2^32 sectors; on a larger disk the
// partition ends there, as Ironic's agent does for disks over 2 TiB.
const mbrMaxSectors = 1 << 32

func addMBR(dev *blockdev.Device, w backend.WritableFile, isoSize int64) (Partition, error) {
	ss := dev.SectorSize()
	table, err := mbr.Read(w, ss, ss)
	if err != nil {
		return Partition{}, fmt.Errorf("reading the MBR of %s: %w", dev.Path(), err)
	}
	slot, primaries := -1, 0
	var usedEnd int64
	for i, p := range table.Partitions {
		if p.Type == mbr.Empty || p.Size == 0 {
			if slot < 0 {
				slot = i
			}
			continue
		}
		primaries++
		usedEnd = max(usedEnd, int64(p.Start)+int64(p.Size)-1)
	}
	if slot < 0 {
		return Partition{}, fmt.Errorf("Config drive cannot be created: disk (%s) uses MBR partitioning and already has %d primary partitions", dev.Path(), primaries)
	}
	last := min(dev.Size()/int64(ss), mbrMaxSectors) - 1
	start, err := placement(dev, last, usedEnd, isoSize)
	if err != nil {
		return Partition{}, err
	}
	// CHS fields say "use LBA", as for any partition past 8 GiB.
	table.Partitions[slot] = &mbr.Partition{
		Index: slot + 1, Type: mbr.Fat32LBA, Start: uint32(start), Size: uint32(last - start + 1),
		StartHead: 0xfe, StartSector: 0xff, StartCylinder: 0xff, EndHead: 0xfe, EndSector: 0xff, EndCylinder: 0xff,
	}
	if err := table.Write(w, dev.Size()); err != nil {
		return Partition{}, fmt.Errorf("writing the MBR of %s: %w", dev.Path(), err)
	}
	return Partition{Number: slot + 1, Start: start * int64(ss), Size: (last - start + 1) * int64(ss), Type: hexType(byte(mbr.Fat32LBA))}, nil
}

// isConfigDriveFS: an ISO 9660 or FAT file system labelled config-2.
func isConfigDriveFS(dev *blockdev.Device, p Partition) bool {
	pvd := make([]byte, 72)
	if p.Size >= 32768+72 {
		if _, err := dev.ReadAt(pvd, p.Start+32768); err == nil && pvd[0] == 1 && string(pvd[1:6]) == "CD001" &&
			strings.EqualFold(strings.TrimRight(string(pvd[40:72]), " \x00"), ConfigDriveLabel) {
			return true
		}
	}
	boot := make([]byte, 512)
	if p.Size < 512 {
		return false
	}
	if _, err := dev.ReadAt(boot, p.Start); err != nil || boot[510] != 0x55 || boot[511] != 0xaa {
		return false
	}
	for _, off := range []int{0x47, 0x2b} { // FAT32, FAT12/16 volume label
		if strings.EqualFold(string(bytes.TrimRight(boot[off:off+11], " \x00")), ConfigDriveLabel) {
			return true
		}
	}
	return false
}
