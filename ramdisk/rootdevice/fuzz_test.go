package rootdevice

import (
	"testing"

	"castiron/ramdisk/protocol"
)

// FuzzHints: any expression in any hint is validated and matched without
// a panic.
func FuzzHints(f *testing.F) {
	for _, s := range []string{"<or> a <or> b", ">= 4", "<range-in> [ 1 2 ]", "s== x", "<all-in> a", "<in>", "==", ""} {
		f.Add("model", s)
		f.Add("size", s)
	}
	model := "QEMU HARDDISK"
	disks := []protocol.Disk{{Name: "/dev/sda", Model: model, Size: 10 << 30, Serial: &model}, {Name: "/dev/sdb", Size: 1 << 30}}
	f.Fuzz(func(t *testing.T, name, expr string) {
		hints := map[string]any{name: expr}
		if Validate(hints) != nil {
			return
		}
		_, _ = Match(disks, hints)
		_, _ = Select(disks, hints, 0)
	})
}
