package redfish

import (
	"slices"
	"testing"

	"castiron/engine/driver"
)

// Cases from Ironic's redfish raid tests, checked against what its
// _find_configuration picks.
func TestPlanVolumes(t *testing.T) {
	disk := func(id string, gb int64, media string) driver.PhysicalDisk {
		return driver.PhysicalDisk{ID: id, Controller: "RAID.Integrated.1-1", CapacityBytes: gb << 30, MediaType: media, Protocol: "SAS"}
	}
	disks := []driver.PhysicalDisk{disk("d0", 800, "HDD"), disk("d1", 800, "HDD"), disk("d2", 800, "HDD"), disk("d3", 800, "HDD"),
		disk("s0", 400, "SSD"), disk("s1", 400, "SSD")}
	for _, c := range []struct {
		name  string
		lds   []map[string]any
		disks [][]string
		err   bool
	}{
		{"raid1 ssd", []map[string]any{{"raid_level": "1", "size_gb": float64(100), "disk_type": "ssd"}}, [][]string{{"s0", "s1"}}, false},
		{"raid5 picks 3", []map[string]any{{"raid_level": "5", "size_gb": float64(100)}}, [][]string{{"d0", "d1", "d2"}}, false},
		{"raid10 needs 4", []map[string]any{{"raid_level": "1+0", "size_gb": float64(100), "disk_type": "hdd"}}, [][]string{{"d0", "d1", "d2", "d3"}}, false},
		{"two volumes", []map[string]any{{"raid_level": "1", "size_gb": float64(100), "disk_type": "ssd"}, {"raid_level": "0", "size_gb": float64(500)}},
			[][]string{{"s0", "s1"}, {"d0"}}, false},
		{"count", []map[string]any{{"raid_level": "0", "size_gb": float64(100), "number_of_physical_disks": float64(3)}}, [][]string{{"d0", "d1", "d2"}}, false},
		{"too big", []map[string]any{{"raid_level": "1", "size_gb": float64(900)}}, nil, true},
		{"raid10 on 2 ssd", []map[string]any{{"raid_level": "1+0", "size_gb": float64(10), "disk_type": "ssd"}}, nil, true},
		{"scsi", []map[string]any{{"raid_level": "1", "size_gb": float64(10), "interface_type": "sata"}}, nil, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			vols, err := planVolumes("n", c.lds, disks)
			if c.err {
				if err == nil {
					t.Fatalf("planned %+v", vols[0])
				}
				t.Logf("%v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vols {
				if !slices.Equal(v.Disks, c.disks[i]) || v.Controller != "RAID.Integrated.1-1" {
					t.Fatalf("volume %d: %+v, want disks %v", i, v, c.disks[i])
				}
			}
		})
	}
}
