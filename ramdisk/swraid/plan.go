// Package swraid is castiron's software RAID, Ironic's raid_interface
// "agent" with logical disks of "controller": "software": the checks
// ironic-python-agent makes on a target_raid_config (Validate, the same
// rules and words), the choice of member disks for each logical disk
// (Plan) and the md arrays built, found and removed in the ramdisk with
// mdadm (MD). The conductor runs Validate before it hands the step to the
// agent, so a bad configuration fails the clean without booting anything
// twice; the agent runs Validate and Plan against its disks.
//
// Layout, and where it differs from IPA: IPA partitions every holding
// disk (a partition per logical disk, an ESP or BIOS boot partition in
// front), builds each md array over those partitions with metadata 1.2,
// deploys partition images onto the array and installs GRUB on every
// holding disk. castiron deploys whole-disk images and installs no boot
// loader, so it builds each array over whole disks with metadata 1.0 (the
// superblock at the end of each member, data from sector 0): the image
// written onto the array lands at the same offsets on every member, and
// each member starts with the image's own MBR and boot loader, which makes
// every RAID-1 member bootable by firmware that knows nothing of md. What
// that costs: logical disks cannot share a disk (IPA's "RAID-1 for the OS
// plus RAID-0 over the rest of the same disks" needs partitions), and a
// UEFI image's ESP is a plain FAT partition on each member that the
// firmware may write to behind md's back (RAID-1 only keeps it identical
// while nothing but Linux writes it).
package swraid

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"castiron/fault/pyrepr"
	"castiron/ramdisk/protocol"
	"castiron/ramdisk/rootdevice"
)

// Levels are the software RAID levels IPA accepts
// (SUPPORTED_SOFTWARE_RAID_LEVELS), with mdadm's name for each.
var Levels = map[string]string{"0": "0", "1": "1", "1+0": "10", "5": "5", "6": "6"}

// minMembers is the fewest member disks castiron builds a level on: what
// mdadm needs for a redundant array of that level (RAID-1+0 as striped
// mirrors, md's raid10 near-2 layout over four or more disks).
var minMembers = map[string]int{"0": 2, "1": 2, "1+0": 4, "5": 3, "6": 4}

// reserveBytes is kept free at the end of every member for the 1.0
// superblock (mdadm reserves 8-128 KiB there, and rounds the data area
// down to 64 KiB); one MiB covers every case.
const reserveBytes = 1 << 20

const gib = 1 << 30

// IsSoftware reports whether a target RAID configuration asks for software
// RAID (any logical disk with "controller": "software"), as IPA decides.
func IsSoftware(cfg map[string]any) bool {
	for _, d := range asList(cfg["logical_disks"]) {
		if m, _ := d.(map[string]any); m["controller"] == "software" {
			return true
		}
	}
	return false
}

// Validate is IPA's validate_configuration (GenericHardwareManager): the
// rules of its software RAID, all errors in one message. nodeUUID names the
// node in it. The RAID-5/6 disk counts, which IPA checks against the disks
// it sees, are Plan's.
func Validate(cfg map[string]any, nodeUUID string) error {
	lds := asList(cfg["logical_disks"])
	if len(lds) == 0 {
		return fmt.Errorf("RAID config contains no logical disks")
	}
	var errs []string
	if len(lds) != 1 && len(lds) != 2 {
		errs = append(errs, "Software RAID configuration requires one or two logical disks")
	}
	var names []string
	root := false
	for _, d := range lds {
		ld, _ := d.(map[string]any)
		if ld["controller"] != "software" {
			errs = append(errs, "Software RAID configuration requires all logical disks to have 'controller'='software'")
		}
		if name, ok := ld["volume_name"].(string); ok {
			if slices.Contains(names, name) {
				errs = append(errs, fmt.Sprintf("Duplicate software RAID device name %s detected", name))
			} else {
				names = append(names, name)
			}
		}
		if r, _ := ld["is_root_volume"].(bool); r {
			if root {
				errs = append(errs, "Software RAID configuration allows only one logical disk to be marked as is_root_volume")
			}
			root = true
		}
		if pd, ok := ld["physical_disks"]; ok && pd != nil {
			list, isList := pd.([]any)
			if !isList || len(list) < 2 {
				errs = append(errs, "The physical_disks parameter for software RAID must be a list with at least 2 items, each specifying a disk in the device hints format")
			}
			for _, item := range list {
				if _, ok := item.(map[string]any); !ok {
					errs = append(errs, "The physical_disks parameter for software RAID must be a list of device hints (dictionaries)")
					break
				}
			}
		}
	}
	first, _ := lds[0].(map[string]any)
	if fmt.Sprint(first["raid_level"]) != "1" {
		errs = append(errs, "Software RAID Configuration requires RAID-1 for the first logical disk")
	}
	if len(lds) == 2 {
		second, _ := lds[1].(map[string]any)
		if first["size_gb"] == "MAX" && second["size_gb"] == "MAX" {
			errs = append(errs, "Software RAID can have only one RAID device with size 'MAX'")
		}
		if lvl := fmt.Sprint(second["raid_level"]); Levels[lvl] == "" {
			errs = append(errs, "Software RAID configuration does not support RAID level "+lvl)
		}
	}
	for i, d := range lds {
		ld, _ := d.(map[string]any)
		if s, ok := sizeGB(ld["size_gb"]); ok && s == 0 {
			errs = append(errs, fmt.Sprintf("Logical disk %d has size_gb 0: give a size in GiB or 'MAX'", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("Could not validate Software RAID config for %s: %s", nodeUUID, strings.Join(errs, "; "))
	}
	return nil
}

// Array is one md array to build: a logical disk on its member disks.
type Array struct {
	Index   int
	Name    string // the array's name: volume_name, or md<index> (IPA's default)
	Level   string // Ironic's raid_level
	Members []string
	// SizeKiB is mdadm's --size (the space used on each member), 0 for
	// all of it (size_gb MAX, and RAID-0, which mdadm sizes itself).
	SizeKiB int64
	Root    bool
	// Logical is the logical disk as given, reported back in raid_config.
	Logical map[string]any
}

// Device is the path mdadm gives the array (a link to /dev/mdN).
func (a Array) Device() string { return "/dev/md/" + a.Name }

// Plan picks the member disks of every logical disk among disks (the
// ramdisk's inventory, md arrays left out) and checks that each array fits:
// physical_disks hints pick one distinct disk each, as IPA's
// get_block_devices_for_raid; without them number_of_physical_disks takes
// that many disks in name order, and otherwise the array spans every disk
// (IPA's default). Logical disks may not share a disk (see the package
// comment).
func Plan(cfg map[string]any, disks []protocol.Disk) ([]Array, error) {
	sorted := slices.Clone(disks)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	byName := map[string]protocol.Disk{}
	for _, d := range sorted {
		byName[d.Name] = d
	}
	owner := map[string]int{}
	var out []Array
	for i, d := range asList(cfg["logical_disks"]) {
		ld, _ := d.(map[string]any)
		level := fmt.Sprint(ld["raid_level"])
		if Levels[level] == "" {
			return nil, fmt.Errorf("Software RAID configuration does not support RAID level %s", level)
		}
		var members []string
		switch pd := asList(ld["physical_disks"]); {
		case len(pd) > 0:
			for _, h := range pd {
				hints, _ := h.(map[string]any)
				var candidates []string
				for _, disk := range sorted {
					if ok, err := rootdevice.Matches(disk, hints); err != nil {
						return nil, fmt.Errorf("physical disk %s of logical disk %d: %w", pyrepr.Repr(hints), i, err)
					} else if ok {
						candidates = append(candidates, disk.Name)
					}
				}
				if len(candidates) == 0 {
					return nil, fmt.Errorf("No candidates for physical disk %s from the list %s", pyrepr.Repr(hints), names(sorted))
				}
				pick := ""
				for _, c := range candidates {
					if !slices.Contains(members, c) {
						pick = c
						break
					}
				}
				if pick == "" {
					return nil, fmt.Errorf("No candidates left for physical disk %s from the list %s after picking %s for previous volumes",
						pyrepr.Repr(hints), pyrepr.Repr(toAny(candidates)), pyrepr.Repr(toAny(members)))
				}
				members = append(members, pick)
			}
		default:
			n, hasN := ld["number_of_physical_disks"]
			want := len(sorted)
			if hasN {
				want = intOf(n)
			}
			for _, disk := range sorted {
				if len(members) == want {
					break
				}
				if _, taken := owner[disk.Name]; taken && hasN {
					continue
				}
				members = append(members, disk.Name)
			}
			if hasN && len(members) < want {
				return nil, fmt.Errorf("logical disk %d asks for %d physical disks; only %d are free: %s", i, want, len(members), strings.Join(members, ", "))
			}
		}
		for _, m := range members {
			if j, taken := owner[m]; taken {
				return nil, fmt.Errorf("logical disks %d and %d would share %s: castiron builds each software RAID array on whole disks (the image's boot loader is then at the start of every member), so give each logical disk its own physical_disks", j, i, m)
			}
			owner[m] = i
		}
		if min := minMembers[level]; len(members) < min {
			return nil, fmt.Errorf("Software RAID configuration is not possible for RAID level %s with only %d block devices found (logical disk %d needs at least %d)", level, len(members), i, min)
		}
		smallest := int64(-1)
		for _, m := range members {
			if s := byName[m].Size; smallest < 0 || s < smallest {
				smallest = s
			}
		}
		usable := smallest - reserveBytes
		a := Array{Index: i, Level: level, Members: members, Logical: ld}
		a.Name, _ = ld["volume_name"].(string)
		if a.Name == "" {
			a.Name = fmt.Sprintf("md%d", i)
		}
		if strings.ContainsAny(a.Name, "/ :") {
			return nil, fmt.Errorf("volume_name %q of logical disk %d: an md array name cannot contain '/', ':' or spaces", a.Name, i)
		}
		a.Root, _ = ld["is_root_volume"].(bool)
		if size, ok := sizeGB(ld["size_gb"]); ok {
			data := dataDisks(level, len(members))
			per := (size*gib + int64(data) - 1) / int64(data)
			if per > usable {
				return nil, fmt.Errorf("logical disk %d (RAID-%s, %d GiB on %d disks) does not fit: each member would hold %.2f GiB, the smallest of %s has room for %.2f GiB",
					i, level, size, len(members), float64(per)/gib, strings.Join(members, ", "), float64(max(usable, 0))/gib)
			}
			if level != "0" {
				a.SizeKiB = (per + 1023) / 1024
				a.SizeKiB = (a.SizeKiB + 63) / 64 * 64 // mdadm's 64 KiB chunk rounding
			}
		} else if usable <= 0 {
			return nil, fmt.Errorf("logical disk %d: %s is too small for a RAID member", i, strings.Join(members, ", "))
		}
		out = append(out, a)
	}
	return out, nil
}

// dataDisks is how many members' worth of data an array of level holds.
func dataDisks(level string, n int) int {
	switch level {
	case "0":
		return n
	case "5":
		return n - 1
	case "6":
		return n - 2
	case "1+0":
		return n / 2
	}
	return 1
}

// sizeGB reads size_gb: an integer (JSON number or digits), false for
// "MAX".
func sizeGB(v any) (int64, bool) {
	switch t := v.(type) {
	case float64:
		return int64(t), true
	case int:
		return int64(t), true
	case int64:
		return t, true
	case string:
		if n, err := strconv.ParseInt(t, 10, 64); err == nil {
			return n, true
		}
	}
	return 0, false
}

func intOf(v any) int {
	n, _ := sizeGB(v)
	return int(n)
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, x := range s {
		out[i] = x
	}
	return out
}

func names(disks []protocol.Disk) string {
	n := make([]any, len(disks))
	for i, d := range disks {
		n[i] = d.Name
	}
	return pyrepr.Repr(n)
}

// Result is what create_configuration returns, which the conductor stores
// as raid_config (Ironic's update_raid_info): the logical disks as built,
// and for the root volume a root_device_hint naming its array, so that
// write_image puts the image on it.
func Result(arrays []Array) map[string]any {
	lds := make([]any, 0, len(arrays))
	for _, a := range arrays {
		ld := map[string]any{}
		for k, v := range a.Logical {
			ld[k] = v
		}
		if a.Root {
			ld["root_device_hint"] = map[string]any{"name": a.Device()}
		}
		lds = append(lds, ld)
	}
	return map[string]any{"logical_disks": lds}
}
