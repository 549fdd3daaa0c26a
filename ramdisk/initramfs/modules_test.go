package initramfs

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

func TestResolve(t *testing.T) {
	db, err := LoadModuleDB(context.Background(), "testdata/modules/6.0.0-test")
	if err != nil {
		t.Fatal(err)
	}
	const (
		libfoo  = "kernel/lib/libfoo.ko.xz"
		netcore = "kernel/net/core/netcore.ko"
		netdrv  = "kernel/drivers/net/netdrv.ko"
		blkdrv  = "kernel/drivers/block/blk-drv.ko.zst"
		crc     = "kernel/lib/crc-thing.ko"
		crcGen  = "kernel/crypto/crc_thing_generic.ko"
		disk    = "kernel/drivers/scsi/disk.ko"
	)
	tests := []struct {
		name  string
		names []string
		want  Resolution
	}{
		{"dependencies first", []string{"netdrv"}, Resolution{Modules: []string{libfoo, netcore, netdrv}}},
		{"dash and underscore are one name", []string{"blk_drv"}, Resolution{Modules: []string{libfoo, blkdrv}}},
		{"shared dependency loaded once", []string{"netdrv", "blk-drv", "netdrv"},
			Resolution{Modules: []string{libfoo, netcore, netdrv, blkdrv}}},
		{"soft pre-dependency through an alias", []string{"disk"}, Resolution{Modules: []string{crcGen, crc, disk}}},
		{"request by alias", []string{"netdrv-alias"}, Resolution{Modules: []string{libfoo, netcore, netdrv}}},
		{"wildcard aliases are not names", []string{"pci:v00001AF4d00001000sv*sd*bc*sc*i*"},
			Resolution{Missing: []string{"pci:v00001AF4d00001000sv*sd*bc*sc*i*"}}},
		{"built-in and missing are reported", []string{"virtio", "built-in-nic", "nosuch", "nosuch"},
			Resolution{Builtin: []string{"virtio", "built_in_nic"}, Missing: []string{"nosuch"}}},
		{"nothing", nil, Resolution{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := db.Resolve(tt.names); !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Resolve(%q)\n got  %+v\n want %+v", tt.names, got, tt.want)
			}
		})
	}
}

// A softdep cycle must neither loop nor lose a module.
func TestResolveSoftdepCycle(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("modules.dep", "a.ko:\nb.ko:\n")
	write("modules.softdep", "softdep a pre: b\nsoftdep b pre: a\n")
	db, err := LoadModuleDB(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := db.Resolve([]string{"a"}).Modules, []string{"b.ko", "a.ko"}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestLoadModuleDBNeedsModulesDep(t *testing.T) {
	if _, err := LoadModuleDB(context.Background(), t.TempDir()); err == nil {
		t.Fatal("no error without modules.dep")
	}
}

func TestReadModule(t *testing.T) {
	for p, want := range map[string]string{
		"kernel/lib/libfoo.ko.xz":             "fake module libfoo\n",
		"kernel/drivers/block/blk-drv.ko.zst": "fake module blk-drv\n",
		"kernel/fs/gzmod.ko.gz":               "fake module gzmod\n",
		"kernel/lib/crc-thing.ko":             "fake module crc-thing\n",
	} {
		got, err := readModule(context.Background(), filepath.Join("testdata/modules/6.0.0-test", p))
		if err != nil {
			t.Errorf("%s: %v", p, err)
		} else if string(got) != want {
			t.Errorf("%s: got %q, want %q", p, got, want)
		}
	}
}
