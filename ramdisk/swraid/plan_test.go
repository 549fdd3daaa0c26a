package swraid

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"castiron/ramdisk/protocol"
)

func ld(kv ...any) map[string]any {
	m := map[string]any{"controller": "software"}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func cfgOf(lds ...map[string]any) map[string]any {
	l := make([]any, len(lds))
	for i, d := range lds {
		l[i] = d
	}
	return map[string]any{"logical_disks": l}
}

// TestValidate: IPA's validate_configuration rules, all broken rules in
// one message naming the node.
func TestValidate(t *testing.T) {
	ok := []map[string]any{
		cfgOf(ld("raid_level", "1", "size_gb", "MAX")),
		cfgOf(ld("raid_level", "1", "size_gb", float64(10)), ld("raid_level", "0", "size_gb", "MAX")),
		cfgOf(ld("raid_level", "1", "size_gb", float64(10)), ld("raid_level", "5", "size_gb", "MAX")),
		cfgOf(ld("raid_level", "1", "size_gb", float64(10)), ld("raid_level", "1+0", "size_gb", float64(20))),
		cfgOf(ld("raid_level", "1", "size_gb", "MAX", "physical_disks", []any{map[string]any{"name": "/dev/vda"}, map[string]any{"name": "/dev/vdb"}})),
	}
	for _, c := range ok {
		if err := Validate(c, "n1"); err != nil {
			t.Errorf("Validate(%v): %v", c, err)
		}
	}
	bad := []struct {
		cfg  map[string]any
		want []string
	}{
		{cfgOf(), []string{"RAID config contains no logical disks"}},
		{cfgOf(ld("raid_level", "0", "size_gb", "MAX")), []string{"requires RAID-1 for the first logical disk"}},
		{cfgOf(ld("raid_level", "1", "size_gb", 1), ld("raid_level", "1", "size_gb", 1), ld("raid_level", "1", "size_gb", 1)),
			[]string{"requires one or two logical disks"}},
		{cfgOf(ld("raid_level", "1", "size_gb", "MAX"), ld("raid_level", "0", "size_gb", "MAX")), []string{"only one RAID device with size 'MAX'"}},
		{cfgOf(ld("raid_level", "1", "size_gb", 1), ld("raid_level", "5+0", "size_gb", "MAX")), []string{"does not support RAID level 5+0"}},
		{cfgOf(ld("raid_level", "1", "size_gb", 1, "volume_name", "a"), ld("raid_level", "0", "size_gb", 1, "volume_name", "a")),
			[]string{"Duplicate software RAID device name a detected"}},
		{cfgOf(ld("raid_level", "1", "size_gb", 1, "is_root_volume", true), ld("raid_level", "0", "size_gb", 1, "is_root_volume", true)),
			[]string{"allows only one logical disk to be marked as is_root_volume"}},
		{map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": 1}}},
			[]string{"requires all logical disks to have 'controller'='software'"}},
		{cfgOf(ld("raid_level", "1", "size_gb", 1, "physical_disks", []any{map[string]any{"name": "/dev/vda"}})),
			[]string{"must be a list with at least 2 items"}},
		{cfgOf(ld("raid_level", "1", "size_gb", 1, "physical_disks", []any{"/dev/vda", "/dev/vdb"})),
			[]string{"must be a list of device hints (dictionaries)"}},
		{cfgOf(ld("raid_level", "1", "size_gb", float64(0))), []string{"size_gb 0"}},
		// every broken rule is reported
		{cfgOf(ld("raid_level", "0", "size_gb", "MAX"), ld("raid_level", "6+0", "size_gb", "MAX")),
			[]string{"requires RAID-1 for the first", "only one RAID device with size 'MAX'", "does not support RAID level 6+0"}},
	}
	for _, c := range bad {
		err := Validate(c.cfg, "node-1")
		if err == nil {
			t.Errorf("Validate(%v) accepted it", c.cfg)
			continue
		}
		if len(c.cfg["logical_disks"].([]any)) > 0 && !strings.HasPrefix(err.Error(), "Could not validate Software RAID config for node-1: ") {
			t.Errorf("error %q does not name the node as IPA does", err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("Validate(%v) = %q, want %q in it", c.cfg, err, w)
			}
		}
	}
}

func disks(sizesGiB ...int64) []protocol.Disk {
	var out []protocol.Disk
	for i, s := range sizesGiB {
		serial := "S" + string(rune('0'+i))
		out = append(out, protocol.Disk{Name: "/dev/vd" + string(rune('a'+i)), Size: s << 30, Serial: &serial})
	}
	return out
}

// TestPlan: member disks per logical disk (hints, number_of_physical_disks,
// all disks), mdadm's level names and sizes, and the refusals: too few
// disks, sizes that do not fit, shared disks, unmatched hints.
func TestPlan(t *testing.T) {
	d := disks(10, 10, 20, 20, 20, 20)
	hints := func(serials ...string) []any {
		var out []any
		for _, s := range serials {
			out = append(out, map[string]any{"serial": s})
		}
		return out
	}
	arrays, err := Plan(cfgOf(
		ld("raid_level", "1", "size_gb", float64(4), "is_root_volume", true, "volume_name", "root", "physical_disks", hints("S1", "S0")),
		ld("raid_level", "5", "size_gb", float64(30), "physical_disks", hints("S2", "S3", "S4")),
	), d)
	if err != nil {
		t.Fatal(err)
	}
	if len(arrays) != 2 {
		t.Fatalf("arrays %+v", arrays)
	}
	root, data := arrays[0], arrays[1]
	if root.Device() != "/dev/md/root" || !root.Root || !reflect.DeepEqual(root.Members, []string{"/dev/vdb", "/dev/vda"}) || root.SizeKiB != 4<<20 {
		t.Errorf("root array %+v", root)
	}
	// RAID-5 of 30 GiB on three disks: 15 GiB on each.
	if data.Name != "md1" || Levels[data.Level] != "5" || len(data.Members) != 3 || data.SizeKiB != 15<<20 {
		t.Errorf("data array %+v", data)
	}
	res := Result(arrays)
	lds := res["logical_disks"].([]any)
	if h, _ := lds[0].(map[string]any)["root_device_hint"].(map[string]any); h["name"] != "/dev/md/root" {
		t.Errorf("result %v: the root volume needs its root_device_hint", res)
	}
	if _, ok := lds[1].(map[string]any)["root_device_hint"]; ok {
		t.Errorf("result %v: only the root volume gets a hint", res)
	}

	// number_of_physical_disks takes that many in name order; RAID-1+0 is md's raid10.
	arrays, err = Plan(cfgOf(ld("raid_level", "1", "size_gb", "MAX", "number_of_physical_disks", float64(2)),
		ld("raid_level", "1+0", "size_gb", "MAX", "number_of_physical_disks", float64(4))), d)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(arrays[0].Members, []string{"/dev/vda", "/dev/vdb"}) || !reflect.DeepEqual(arrays[1].Members, []string{"/dev/vdc", "/dev/vdd", "/dev/vde", "/dev/vdf"}) ||
		Levels[arrays[1].Level] != "10" || arrays[0].SizeKiB != 0 {
		t.Errorf("arrays %+v", arrays)
	}
	// Without hints or a count a logical disk spans every disk.
	arrays, err = Plan(cfgOf(ld("raid_level", "1", "size_gb", "MAX")), d)
	if err != nil || len(arrays[0].Members) != 6 {
		t.Errorf("spanning array %+v, %v", arrays, err)
	}

	for _, c := range []struct {
		cfg  map[string]any
		want string
	}{
		{cfgOf(ld("raid_level", "1", "size_gb", "MAX", "physical_disks", hints("S0", "S1")), ld("raid_level", "5", "size_gb", float64(1), "physical_disks", hints("S2", "S3"))),
			"not possible for RAID level 5 with only 2 block devices"},
		{cfgOf(ld("raid_level", "1", "size_gb", "MAX", "physical_disks", hints("S0", "S1")), ld("raid_level", "1+0", "size_gb", float64(1), "physical_disks", hints("S2", "S3"))),
			"not possible for RAID level 1+0 with only 2 block devices"},
		{cfgOf(ld("raid_level", "1", "size_gb", float64(10), "physical_disks", hints("S0", "S1"))), "does not fit"},
		{cfgOf(ld("raid_level", "1", "size_gb", float64(4)), ld("raid_level", "0", "size_gb", "MAX")), "would share /dev/vda"},
		{cfgOf(ld("raid_level", "1", "size_gb", float64(4), "physical_disks", hints("S0", "S9"))), "No candidates for physical disk {'serial': 'S9'}"},
		{cfgOf(ld("raid_level", "1", "size_gb", float64(4), "physical_disks", hints("S0", "S0"))), "No candidates left for physical disk {'serial': 'S0'}"},
		{cfgOf(ld("raid_level", "1", "size_gb", float64(4), "number_of_physical_disks", float64(8))), "asks for 8 physical disks"},
		{cfgOf(ld("raid_level", "1", "size_gb", float64(4), "volume_name", "a/b")), "cannot contain"},
	} {
		if _, err := Plan(c.cfg, d); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Plan(%v) = %v, want %q", c.cfg, err, c.want)
		}
	}
}

// TestHasSuperblock finds the md magic where each metadata version keeps
// it, and nothing on a blank disk.
func TestHasSuperblock(t *testing.T) {
	const size = 64 << 20
	magic := binary.LittleEndian.AppendUint32(nil, mdMagic)
	for name, off := range map[string]int64{
		"1.1": 0, "1.2": 4096,
		"1.0":  ((size/512 - 16) &^ 7) * 512,
		"0.90": ((size / 512 &^ 127) - 128) * 512,
	} {
		img := make([]byte, size)
		copy(img[off:], magic)
		if ok, err := HasSuperblock(bytes.NewReader(img), size); !ok || err != nil {
			t.Errorf("metadata %s at %d: found %v, %v", name, off, ok, err)
		}
	}
	if ok, err := HasSuperblock(bytes.NewReader(make([]byte, size)), size); ok || err != nil {
		t.Errorf("blank disk: found %v, %v", ok, err)
	}
	// IsMember reads a file (a block device in the ramdisk) the same way.
	p := filepath.Join(t.TempDir(), "disk")
	img := make([]byte, 1<<20)
	copy(img[((1<<20)/512-16)&^7*512:], magic)
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	if ok, err := IsMember(p); !ok || err != nil {
		t.Errorf("IsMember: %v, %v", ok, err)
	}
}

// TestIsSoftware: a configuration is software RAID when a logical disk
// says so (IPA's test before it builds anything).
func TestIsSoftware(t *testing.T) {
	if !IsSoftware(cfgOf(ld("raid_level", "1", "size_gb", 1))) {
		t.Error("software not seen")
	}
	if IsSoftware(map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": 1}}}) {
		t.Error("hardware taken for software")
	}
}
