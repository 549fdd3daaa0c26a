package steps

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"castiron/ramdisk/agent/steps/blockdev"
	"castiron/ramdisk/agent/steps/partitions"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/swraid"
)

const mib = 1 << 20

// Where file system and RAID signatures live, besides the first and last
// MiB of a disk or partition (partition tables, MBR/GPT, ext*, XFS, LVM,
// md, swap, LUKS, ZFS labels, ISO 9660, FAT, bcache): btrfs keeps a
// superblock copy at 64 MiB.
const (
	edgeWipe     = 1 * mib
	btrfsMirror  = 64 * mib
	btrfsMirrorN = 64 << 10
)

// errReadOnly marks a disk the kernel flags read-only; erasing skips it.
var errReadOnly = errors.New("the device is read-only")

func (r *runner) eraseDevicesMetadata(ctx context.Context, log *slog.Logger, args map[string]any, inv *protocol.Inventory, rep *reporter) (map[string]any, error) {
	devs, err := targetDevices(args, inv)
	if err != nil {
		return nil, err
	}
	var erased, skipped, failed []string
	for i, path := range devs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rep.report(protocol.Progress{Done: int64(i), Total: int64(len(devs)), Unit: "disks", Message: "erasing metadata on " + path}, false)
		// IPA skips software RAID members (_is_linux_raid_member): the
		// arrays go with raid.delete_configuration, not with cleaning.
		if member, _ := swraid.IsMember(path); member {
			log.Info("skipping erasure of RAID member device", "device", path)
			skipped = append(skipped, path)
			continue
		}
		err := wipePath(ctx, log, path)
		switch {
		case errors.Is(err, errReadOnly):
			log.Info("skipping read-only device", "device", path)
			skipped = append(skipped, path)
		case err != nil:
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			log.Error("failed to erase the metadata", "device", path, "error", err)
			failed = append(failed, fmt.Sprintf("%q: %v", path, err))
		default:
			erased = append(erased, path)
		}
	}
	rep.report(protocol.Progress{Done: int64(len(devs)), Total: int64(len(devs)), Unit: "disks", Message: fmt.Sprintf("erased metadata on %d disks", len(erased))}, true)
	if len(failed) > 0 {
		return nil, fmt.Errorf("Failed to erase the metadata on the device(s): %s", strings.Join(failed, "; "))
	}
	return map[string]any{"erased": nonNil(erased), "skipped": nonNil(skipped)}, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func wipePath(ctx context.Context, log *slog.Logger, path string) error {
	dev, err := blockdev.Open(path)
	if err != nil {
		return err
	}
	defer dev.Close()
	if dev.ReadOnly() {
		return errReadOnly
	}
	return wipeMetadata(ctx, log, dev)
}

// wipeMetadata zeroes the regions where partition tables and signatures
// live: the first and last MiB of the disk and of every partition its
// table lists (partitions first), and the btrfs copies at 64 MiB. The
// kernel is then asked to forget the partitions.
func wipeMetadata(ctx context.Context, log *slog.Logger, dev *blockdev.Device) error {
	path := dev.Path()
	size := dev.Size()
	table := partitions.Read(dev, size, dev.SectorSize())
	var ranges [][2]int64
	add := func(start, length int64) {
		s, e := max(start, 0), min(start+length, size)
		if s < e {
			ranges = append(ranges, [2]int64{s, e})
		}
	}
	region := func(start, length int64) {
		add(start, min(edgeWipe, length))
		add(start+length-edgeWipe, edgeWipe)
		if length >= btrfsMirror+btrfsMirrorN {
			add(start+btrfsMirror, btrfsMirrorN)
		}
	}
	parts := slices.Clone(table.Partitions)
	slices.SortFunc(parts, func(a, b partitions.Partition) int { return b.Number - a.Number })
	for _, p := range parts {
		region(p.Start, p.Size)
	}
	region(0, size)
	ss := int64(dev.SectorSize())
	for _, rg := range ranges {
		// Whole sectors, for BLKZEROOUT; nothing lies past the last one.
		s := rg[0] / ss * ss
		e := min((rg[1]+ss-1)/ss*ss, size)
		if err := dev.ZeroRange(ctx, s, e-s, nil); err != nil {
			return err
		}
	}
	if err := dev.Sync(); err != nil {
		return err
	}
	if err := dev.RereadPartitions(); err != nil {
		log.Debug("partition table re-read failed", "device", path, "error", err)
	}
	log.Info("erased disk metadata", "device", path, "table", table.Kind, "partitions", len(table.Partitions))
	return nil
}

func (r *runner) eraseDevices(ctx context.Context, log *slog.Logger, args map[string]any, inv *protocol.Inventory, rep *reporter) (map[string]any, error) {
	full, err := argBool(args, protocol.ArgEraseFullPass, true)
	if err != nil {
		return nil, err
	}
	paths, err := targetDevices(args, inv)
	if err != nil {
		return nil, err
	}
	var devs []*blockdev.Device
	defer func() {
		for _, d := range devs {
			d.Close()
		}
	}()
	var total int64
	var skipped []string
	for _, p := range paths {
		d, err := blockdev.Open(p)
		if err != nil {
			return nil, err
		}
		if d.ReadOnly() {
			log.Info("skipping read-only device", "device", p)
			skipped = append(skipped, p)
			d.Close()
			continue
		}
		if member, _ := swraid.HasSuperblock(d, d.Size()); member {
			log.Info("skipping erasure of RAID member device", "device", p)
			skipped = append(skipped, p)
			d.Close()
			continue
		}
		devs = append(devs, d)
		total += d.Size()
	}
	if !full {
		// A quick erase: metadata gone, and the device told that every
		// block is free (what it then reads is up to the device).
		var erased []string
		for i, d := range devs {
			rep.report(protocol.Progress{Done: int64(i), Total: int64(len(devs)), Unit: "disks", Message: "erasing " + d.Path()}, false)
			if err := d.Discard(0, d.Size()); err != nil {
				log.Info("discard not supported", "device", d.Path(), "error", err)
			}
			if err := wipeMetadata(ctx, log, d); err != nil {
				return nil, fmt.Errorf("erasing %s: %w", d.Path(), err)
			}
			erased = append(erased, d.Path())
		}
		rep.report(protocol.Progress{Done: int64(len(devs)), Total: int64(len(devs)), Unit: "disks", Message: "erased"}, true)
		return map[string]any{"erased": nonNil(erased), "skipped": nonNil(skipped), "full": false}, nil
	}
	var done int64
	var erased []string
	for _, d := range devs {
		base := done
		msg := "zeroing " + d.Path()
		err := d.ZeroRange(ctx, 0, d.Size(), func(n int64) {
			rep.report(protocol.Progress{Done: base + n, Total: total, Unit: "bytes", Message: fmt.Sprintf("%s: %s of %s", msg, humanBytes(n), humanBytes(d.Size()))}, false)
		})
		if err == nil {
			err = d.Sync()
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("erasing %s: %w", d.Path(), err)
		}
		if err := d.RereadPartitions(); err != nil {
			log.Debug("partition table re-read failed", "device", d.Path(), "error", err)
		}
		done += d.Size()
		erased = append(erased, d.Path())
		log.Info("erased device", "device", d.Path(), "bytes", d.Size())
	}
	rep.report(protocol.Progress{Done: done, Total: total, Unit: "bytes", Message: fmt.Sprintf("zeroed %d disks, %s", len(erased), humanBytes(done))}, true)
	return map[string]any{"erased": nonNil(erased), "skipped": nonNil(skipped), "full": true, "bytes_erased": done}, nil
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
