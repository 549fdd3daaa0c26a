package kmod

import "testing"

func TestName(t *testing.T) {
	for in, want := range map[string]string{
		"kernel/drivers/block/virtio_blk.ko":    "virtio_blk",
		"kernel/drivers/block/virtio-blk.ko.xz": "virtio_blk",
		"kernel/lib/crc-t10dif.ko.zst":          "crc_t10dif",
		"kernel/fs/x.ko.gz":                     "x",
		"virtio-net":                            "virtio_net",
		"sd_mod":                                "sd_mod",
	} {
		if got := Name(in); got != want {
			t.Errorf("Name(%q) = %q, want %q", in, got, want)
		}
	}
}
