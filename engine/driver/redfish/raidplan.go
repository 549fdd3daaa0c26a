package redfish

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"castiron/engine/driver"
	"castiron/fault"
)

// The volume planner is Ironic's redfish raid.py (_find_configuration and
// the helpers around it) in Go: the same RAID level table, the same choice
// of physical disks (grouped by media type, protocol and size, smallest
// free space first, the fewest disks the level needs), the same size
// arithmetic (64 MiB stripes) and the same messages, so that a
// target_raid_config builds the volumes it builds under Ironic.

type raidLevel struct {
	minDisks, maxDisks, overhead int
	spanned                      bool
	raidType                     string
	spanType                     string
}

var raidLevelTable = map[string]raidLevel{
	"0":   {minDisks: 1, maxDisks: 1000, raidType: "RAID0"},
	"1":   {minDisks: 2, maxDisks: 2, overhead: 1, raidType: "RAID1"},
	"5":   {minDisks: 3, maxDisks: 1000, overhead: 1, raidType: "RAID5"},
	"6":   {minDisks: 4, maxDisks: 1000, overhead: 2, raidType: "RAID6"},
	"1+0": {spanned: true, raidType: "RAID10", spanType: "1"},
	"5+0": {spanned: true, raidType: "RAID50", spanType: "5"},
	"6+0": {spanned: true, raidType: "RAID60", spanType: "6"},
}

// RAIDType is the Redfish RAIDType of an Ironic raid_level ("" if none).
func RAIDType(level string) string { return raidLevelTable[level].raidType }

// RAIDLevelOf is the Ironic raid_level of a Redfish RAIDType ("" if none).
func RAIDLevelOf(raidType string) string {
	for k, v := range raidLevelTable {
		if v.raidType == raidType {
			return k
		}
	}
	return ""
}

const (
	gib          = int64(1) << 30
	stripeSizeKB = 64 * 1024
)

// plannedVolume is one logical disk with its disks, size and controller.
type plannedVolume struct {
	Level      string
	SizeBytes  int64 // 0 with Max
	Max        bool
	Disks      []string
	Controller string
	Name       string
	Root       bool

	diskType, ifaceType string
	count               int // number_of_physical_disks, 0 if unset
	share               bool
	hasDisks            bool
}

func levelNotSupported(level string) error {
	keys := []string{"0", "1", "5", "6", "1+0", "5+0", "6+0"}
	return fmt.Errorf("RAID level %s is not supported by the driver. Supported RAID levels: %s", level, strings.Join(keys, ", "))
}

func spanInfo(level string, spans int) (raidLevel, error) {
	info, ok := raidLevelTable[level]
	if !ok {
		return info, levelNotSupported(level)
	}
	if info.spanned {
		if spans <= 1 {
			return info, fmt.Errorf("Spanned RAID volumes cannot contain a single span")
		}
		info = raidLevelTable[info.spanType]
	}
	return info, nil
}

func levelOverhead(level string, spans int) (int, error) {
	info, err := spanInfo(level, spans)
	return info.overhead * spans, err
}

func levelMinDisks(level string, spans int) (int, error) {
	info, err := spanInfo(level, spans)
	return info.minDisks * spans, err
}

func levelMaxDisks(level string, spans int) (int, error) {
	info, err := spanInfo(level, spans)
	return info.maxDisks * spans, err
}

func calculateSpans(level string, disks int) (int, error) {
	switch level {
	case "0", "1", "5", "6":
		return 1, nil
	case "5+0", "6+0":
		return 2, nil
	case "1+0":
		return disks >> 1, nil
	}
	return 0, fmt.Errorf("Cannot calculate spans for RAID level \"%s\"", level)
}

func usableDisks(level string, disks int) (int, error) {
	switch level {
	case "0", "1", "5", "6":
		return disks, nil
	case "5+0", "6+0", "1+0":
		return (disks >> 1) << 1, nil
	}
	return 0, levelNotSupported(level)
}

func maxVolumeBytes(level string, disks []driver.PhysicalDisk, free map[string]int64, spans int) (int64, error) {
	smallest := int64(-1)
	for _, d := range disks {
		if f := free[d.ID]; smallest < 0 || f < smallest {
			smallest = f
		}
	}
	stripesPerDisk := (smallest / 1024) / stripeSizeKB
	overhead, err := levelOverhead(level, spans)
	if err != nil {
		return 0, err
	}
	if len(disks) <= overhead {
		return 0, fmt.Errorf("The number of physical drives (%d) is too few for the required number of overhead drives (%d)", len(disks), overhead)
	}
	return stripesPerDisk * stripeSizeKB * int64(len(disks)-overhead) * 1024, nil
}

func ceilDiv(a, b int64) int64 { return (a + b - 1) / b }

func usagePerDisk(level string, size int64, disks, spans int) (int64, error) {
	overhead, err := levelOverhead(level, spans)
	if err != nil {
		return 0, err
	}
	stripesPerVolume := ceilDiv(size/1024, stripeSizeKB)
	stripesPerDisk := ceilDiv(stripesPerVolume, int64(disks-overhead))
	return stripesPerDisk * stripeSizeKB * 1024, nil
}

// volumeProps is _calculate_volume_props: checks that v's disks hold it,
// takes their space from free and picks the controller of its first disk.
func volumeProps(v *plannedVolume, all []driver.PhysicalDisk, free map[string]int64) error {
	var sel []driver.PhysicalDisk
	for _, d := range all {
		if slices.Contains(v.Disks, d.ID) {
			sel = append(sel, d)
		}
	}
	spans, err := calculateSpans(v.Level, len(sel))
	if err != nil {
		return err
	}
	if spans == 0 || len(sel)%spans != 0 {
		return fmt.Errorf("For RAID level %s, the number of physical disks provided (%d) must be a multiple of the spans count (%d)", v.Level, len(sel), spans)
	}
	maxBytes, err := maxVolumeBytes(v.Level, sel, free, spans)
	if err != nil {
		return err
	}
	size := v.SizeBytes
	if v.Max {
		if maxBytes == 0 {
			return fmt.Errorf("size set to 'MAX' but could not allocate physical disk space")
		}
		size = maxBytes
	} else if maxBytes < size {
		return fmt.Errorf("The physical disk space (%d bytes) is not enough for the size of the logical disk (%d bytes)", maxBytes, size)
	}
	usage, err := usagePerDisk(v.Level, size, len(sel), spans)
	if err != nil {
		return err
	}
	for _, d := range sel {
		if free[d.ID] < usage {
			return fmt.Errorf("The free space of a disk (%d bytes) is not enough for the per-disk size of the logical disk (%d bytes)", free[d.ID], usage)
		}
		free[d.ID] -= usage
	}
	if v.Controller == "" && len(sel) > 0 {
		v.Controller = sel[0].Controller
	}
	return nil
}

type diskGroup struct {
	media, protocol string
	size            int64
	disks           []driver.PhysicalDisk
}

var protocolNames = map[string]string{"SAS": "sas", "SATA": "sata"}

func copyFree(m map[string]int64) map[string]int64 {
	out := make(map[string]int64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// assignDisks is _assign_disks_to_volume: a depth-first search over disk
// groups and disk counts for vols[0], then the rest.
func assignDisks(vols []*plannedVolume, groups []*diskGroup, free map[string]int64, all []driver.PhysicalDisk) (bool, map[string]int64, error) {
	v := vols[0]
	for _, g := range groups {
		if v.diskType != "" && !strings.EqualFold(v.diskType, g.media) {
			continue
		}
		if v.ifaceType != "" && !strings.EqualFold(v.ifaceType, protocolNames[g.protocol]) {
			continue
		}
		var disks []driver.PhysicalDisk
		for _, d := range g.disks {
			if free[d.ID] > 0 && (v.share || d.CapacityBytes == free[d.ID]) {
				disks = append(disks, d)
			}
		}
		sort.SliceStable(disks, func(i, j int) bool { return free[disks[i].ID] < free[disks[j].ID] })
		maxSpans, err := calculateSpans(v.Level, len(disks))
		if err != nil {
			return false, free, err
		}
		minDisks, err := levelMinDisks(v.Level, min(2, maxSpans))
		if err != nil {
			return false, free, err
		}
		maxDisks, err := levelMaxDisks(v.Level, maxSpans)
		if err != nil {
			return false, free, err
		}
		for n := minDisks; n <= min(maxDisks, len(disks)); n++ {
			if v.count != 0 && v.count != n {
				continue
			}
			if u, _ := usableDisks(v.Level, n); u != n {
				continue
			}
			cand := *v
			cand.Disks = nil
			for _, d := range disks[:n] {
				cand.Disks = append(cand.Disks, d.ID)
			}
			candFree := copyFree(free)
			if volumeProps(&cand, all, candFree) != nil {
				continue
			}
			if len(vols) > 1 {
				ok, restFree, err := assignDisks(vols[1:], groups, candFree, all)
				if err != nil || !ok {
					continue
				}
				*v = cand
				return true, restFree, nil
			}
			*v = cand
			return true, candFree, nil
		}
	}
	return false, free, nil
}

// planVolumes turns target_raid_config's logical_disks into the volumes to
// create on the given disks (those of controllers that build volumes).
func planVolumes(nodeUUID string, lds []map[string]any, disks []driver.PhysicalDisk) ([]*plannedVolume, error) {
	var vols []*plannedVolume
	for _, ld := range lds {
		v := &plannedVolume{}
		v.Level, _ = ld["raid_level"].(string)
		if _, ok := raidLevelTable[v.Level]; !ok {
			return nil, fault.New(fault.Invalid, "%s", levelNotSupported(v.Level))
		}
		v.Name, _ = ld["volume_name"].(string)
		v.Root, _ = ld["is_root_volume"].(bool)
		v.Controller, _ = ld["controller"].(string)
		v.diskType, _ = ld["disk_type"].(string)
		v.ifaceType, _ = ld["interface_type"].(string)
		v.share, _ = ld["share_physical_disks"].(bool)
		if n, ok := asInt(ld["number_of_physical_disks"]); ok {
			v.count = int(n)
		}
		if pd, ok := ld["physical_disks"].([]any); ok {
			v.hasDisks = true
			for _, p := range pd {
				s, ok := p.(string)
				if !ok {
					return nil, fault.New(fault.Invalid, "physical_disks of a hardware RAID logical disk must be drive identities (strings), got %v", p)
				}
				if !slices.ContainsFunc(disks, func(d driver.PhysicalDisk) bool { return d.ID == s }) {
					var ids []string
					for _, d := range disks {
						ids = append(ids, d.ID)
					}
					return nil, fault.New(fault.Invalid, "physical disk %q is not a drive of a RAID controller of node %s (drives: %s)", s, nodeUUID, strings.Join(ids, ", "))
				}
				v.Disks = append(v.Disks, s)
			}
		}
		switch sz := ld["size_gb"].(type) {
		case string:
			if sz != "MAX" {
				return nil, fault.New(fault.Invalid, "size_gb must be an integer or 'MAX', got %q", sz)
			}
			if !v.hasDisks {
				return nil, fault.New(fault.Invalid, "create_configuration called with invalid target_raid_configuration for node %s. 'physical_disks' is missing from logical_disk while 'size_gb'='MAX' was requested: %v", nodeUUID, ld)
			}
			v.Max = true
		default:
			n, ok := asInt(sz)
			if !ok {
				return nil, fault.New(fault.Invalid, "size_gb must be an integer or 'MAX', got %v", sz)
			}
			v.SizeBytes = n * gib
		}
		vols = append(vols, v)
	}

	free := map[string]int64{}
	var groups []*diskGroup
	reserved := map[string]bool{}
	for _, v := range vols {
		if v.hasDisks && v.Max && v.share {
			for _, d := range v.Disks {
				reserved[d] = true
			}
		}
	}
	groupOf := func(gs []*diskGroup, d driver.PhysicalDisk) *diskGroup {
		for _, g := range gs {
			if g.media == d.MediaType && g.protocol == d.Protocol && g.size == d.CapacityBytes {
				return g
			}
		}
		return nil
	}
	var reservedGroups []*diskGroup
	for _, d := range disks {
		free[d.ID] = d.CapacityBytes
		g := groupOf(groups, d)
		if g == nil {
			g = &diskGroup{media: d.MediaType, protocol: d.Protocol, size: d.CapacityBytes}
			groups = append(groups, g)
			reservedGroups = append(reservedGroups, &diskGroup{media: d.MediaType, protocol: d.Protocol, size: d.CapacityBytes})
		}
		if reserved[d.ID] {
			rg := groupOf(reservedGroups, d)
			rg.disks = append(rg.disks, d)
		} else {
			g.disks = append(g.disks, d)
		}
	}
	for _, v := range vols {
		if v.hasDisks && !v.share {
			for _, g := range groups {
				g.disks = slices.DeleteFunc(g.disks, func(d driver.PhysicalDisk) bool { return slices.Contains(v.Disks, d.ID) })
			}
		}
	}
	fail := func(err error) error { return fault.Wrap(fault.Invalid, err, "%s", err.Error()) }
	for _, v := range vols {
		if v.hasDisks && !v.Max {
			if err := volumeProps(v, disks, free); err != nil {
				return nil, fail(err)
			}
		}
	}
	var without []*plannedVolume
	for _, v := range vols {
		if !v.hasDisks {
			without = append(without, v)
		}
	}
	if len(without) > 0 {
		ok, f, err := assignDisks(without, groups, free, disks)
		if err != nil {
			return nil, fail(err)
		}
		if !ok {
			for i, g := range groups {
				g.disks = append(g.disks, reservedGroups[i].disks...)
			}
			if ok, f, err = assignDisks(without, groups, free, disks); err != nil {
				return nil, fail(err)
			}
			if !ok {
				return nil, fault.New(fault.Invalid, "failed to find matching physical disks for all logical disks")
			}
		}
		free = f
	}
	for _, v := range vols {
		if v.hasDisks && v.Max {
			if err := volumeProps(v, disks, free); err != nil {
				return nil, fail(err)
			}
		}
	}
	return vols, nil
}

func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case int:
		return int64(n), true
	case int64:
		return n, true
	case float64:
		if n == float64(int64(n)) {
			return int64(n), true
		}
	}
	return 0, false
}
