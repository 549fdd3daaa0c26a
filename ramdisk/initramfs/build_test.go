package initramfs

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/u-root/u-root/pkg/cpio"
)

func TestBuildLayout(t *testing.T) {
	opts := fakeOptions(t)
	extra := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(extra, []byte("CERT\n"), 0o640); err != nil {
		t.Fatal(err)
	}
	opts.Extra = map[string]string{"/etc/ssl/certs/ca.pem": extra}
	opts.BuildTime = time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)

	res, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	wantModules := []string{
		"kernel/lib/libfoo.ko", "kernel/net/core/netcore.ko", "kernel/drivers/net/netdrv.ko",
		"kernel/drivers/block/blk-drv.ko", "kernel/crypto/crc_thing_generic.ko", "kernel/lib/crc-thing.ko",
		"kernel/drivers/scsi/disk.ko", "kernel/fs/gzmod.ko",
	}
	if !reflect.DeepEqual(res.Modules, wantModules) {
		t.Errorf("Result.Modules\n got  %q\n want %q", res.Modules, wantModules)
	}
	if !reflect.DeepEqual(res.Builtin, []string{"virtio"}) || !reflect.DeepEqual(res.Missing, []string{"nosuch"}) {
		t.Errorf("Builtin %q Missing %q", res.Builtin, res.Missing)
	}
	if res.KernelVersion != "6.0.0-test" || res.AgentVersion != testInitVersion || res.Compression != DefaultCompression {
		t.Errorf("Result %+v", res)
	}
	if fi, err := os.Stat(res.InitramfsPath); err != nil || fi.Size() != res.Size {
		t.Errorf("initramfs: stat %v, size %d, Result.Size %d", err, fi.Size(), res.Size)
	}
	kernelBytes, _ := os.ReadFile(res.KernelPath)
	if want, _ := os.ReadFile("testdata/boot/vmlinuz-6.0.0-test"); !bytes.Equal(kernelBytes, want) {
		t.Errorf("vmlinuz is not a copy of the kernel: %q", kernelBytes)
	}
	// Atomic writes leave no temporary files behind.
	if names := dirNames(t, opts.OutDir); !reflect.DeepEqual(names, []string{"initramfs", "vmlinuz"}) {
		t.Errorf("OutDir holds %q", names)
	}

	files := readArchive(t, res.InitramfsPath)
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = f.Name
		if f.UID != 0 || f.GID != 0 || f.MTime != 0 {
			t.Errorf("%s: uid %d gid %d mtime %d, want 0 0 0", f.Name, f.UID, f.GID, f.MTime)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("archive not sorted: %q", names)
	}
	agent, _ := os.ReadFile(opts.AgentPath)
	byPath := byName(files)
	tests := []wantFile{
		{name: "init", mode: cpio.S_IFREG | 0o755, data: agent},
		{name: "dev/console", mode: cpio.S_IFCHR | 0o600, rmajor: 5, rminor: 1},
		{name: "dev/null", mode: cpio.S_IFCHR | 0o666, rmajor: 1, rminor: 3},
		{name: "etc/modules.order", mode: cpio.S_IFREG | 0o644, data: []byte(strings.Join(wantModules, "\n") + "\n")},
		{name: "lib/modules/kernel/lib/libfoo.ko", mode: cpio.S_IFREG | 0o644, data: []byte("fake module libfoo\n")},
		{name: "lib/modules/kernel/drivers/block/blk-drv.ko", mode: cpio.S_IFREG | 0o644, data: []byte("fake module blk-drv\n")},
		{name: "lib/modules/kernel/fs/gzmod.ko", mode: cpio.S_IFREG | 0o644, data: []byte("fake module gzmod\n")},
		{name: "lib/modules/kernel/drivers/net/netdrv.ko", mode: cpio.S_IFREG | 0o644, data: []byte("fake module netdrv\n")},
		{name: "lib/modules/modules.alias", mode: cpio.S_IFREG | 0o644, data: []byte(
			"alias crcthing crc_thing_generic\n" +
				"alias pci:v00001AF4d00001000sv*sd*bc*sc*i* netdrv\n" +
				"alias netdrv-alias netdrv\n" +
				"alias virtio:d00000001v* netdrv\n")},
		{name: "lib/modules/modules.dep", mode: cpio.S_IFREG | 0o644, data: []byte(
			"kernel/lib/libfoo.ko:\n" +
				"kernel/net/core/netcore.ko: kernel/lib/libfoo.ko\n" +
				"kernel/drivers/net/netdrv.ko: kernel/net/core/netcore.ko kernel/lib/libfoo.ko\n" +
				"kernel/drivers/block/blk-drv.ko: kernel/lib/libfoo.ko\n" +
				"kernel/crypto/crc_thing_generic.ko:\n" +
				"kernel/lib/crc-thing.ko:\n" +
				"kernel/drivers/scsi/disk.ko: kernel/lib/crc-thing.ko\n" +
				"kernel/fs/gzmod.ko:\n")},
		{name: "lib/modules/modules.softdep", mode: cpio.S_IFREG | 0o644, data: []byte(
			"softdep crc_thing pre: crcthing\n" +
				"softdep disk ignored-word\n")},
		{name: "etc/ssl/certs/ca.pem", mode: cpio.S_IFREG | 0o640, data: []byte("CERT\n")},
		{name: "etc/castiron-ramdisk", mode: cpio.S_IFREG | 0o644, dataContains: `KERNEL_VERSION="6.0.0-test"` + "\n" +
			`AGENT_VERSION="` + testInitVersion + `"` + "\n" + `AGENT_SHA256="` + res.AgentSHA256 + `"` + "\n" +
			`BUILD_TIME="2025-01-02T03:04:05Z"` + "\n" + `COMPRESSION="` + string(DefaultCompression) + `"` + "\n" + `MODULES="8"`},
		{name: "tmp", mode: cpio.S_IFDIR | 0o1777},
		{name: "etc/ssl/certs", mode: cpio.S_IFDIR | 0o755},
		{name: "lib/modules/kernel/drivers/block", mode: cpio.S_IFDIR | 0o755},
	}
	for _, d := range []string{"proc", "sys", "dev", "run", "etc", "mnt", "lib", "lib/modules"} {
		tests = append(tests, wantFile{name: d, mode: cpio.S_IFDIR | 0o755})
	}
	for _, tt := range tests {
		f, ok := byPath[tt.name]
		if !ok {
			t.Errorf("%s: not in the archive", tt.name)
			continue
		}
		if f.Mode != tt.mode || f.Rmajor != tt.rmajor || f.Rminor != tt.rminor {
			t.Errorf("%s: mode %#o rdev %d,%d; want %#o %d,%d", tt.name, f.Mode, f.Rmajor, f.Rminor, tt.mode, tt.rmajor, tt.rminor)
		}
		if tt.data != nil && !bytes.Equal(f.data, tt.data) {
			t.Errorf("%s: contents %.80q, want %.80q", tt.name, f.data, tt.data)
		}
		if !strings.Contains(string(f.data), tt.dataContains) {
			t.Errorf("%s: contents %q lack %q", tt.name, f.data, tt.dataContains)
		}
	}
	for name := range byPath {
		if strings.HasSuffix(name, ".xz") || strings.HasSuffix(name, ".zst") || strings.HasSuffix(name, ".gz") {
			t.Errorf("%s: compressed module in the archive", name)
		}
	}
}

// wantFile is what one archive entry must look like.
type wantFile struct {
	name           string
	mode           uint64
	rmajor, rminor uint64
	data           []byte // nil: not checked
	dataContains   string
}

func TestBuildReproducible(t *testing.T) {
	for _, c := range []Compression{Gzip, Zstd, LZ4, None} {
		t.Run(string(c), func(t *testing.T) {
			build := func(at time.Time) []byte {
				opts := fakeOptions(t)
				opts.Compression = c
				opts.BuildTime = at
				res, err := Build(context.Background(), opts)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(res.InitramfsPath)
				if err != nil {
					t.Fatal(err)
				}
				return b
			}
			at := time.Unix(1700000000, 0)
			first, second := build(at), build(at)
			if !bytes.Equal(first, second) {
				t.Errorf("two builds from the same inputs differ (%d and %d bytes)", len(first), len(second))
			}
			if later := build(at.Add(time.Second)); bytes.Equal(first, later) {
				t.Error("the build time is not recorded")
			}
		})
	}
}

func TestBuildErrors(t *testing.T) {
	gzipOnlyBoot := t.TempDir()
	copyFile(t, "testdata/boot/vmlinuz-6.0.0-test", filepath.Join(gzipOnlyBoot, "vmlinuz-6.0.0-test"))
	if err := os.WriteFile(filepath.Join(gzipOnlyBoot, "config-6.0.0-test"), []byte("CONFIG_RD_GZIP=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(t.TempDir(), "init.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		modify  func(*Options)
		wantErr error
	}{
		{"zstd on a kernel without CONFIG_RD_ZSTD", func(o *Options) { o.BootDir, o.Compression = gzipOnlyBoot, Zstd }, ErrCompressionUnsupported},
		{"lz4 on a kernel without CONFIG_RD_LZ4", func(o *Options) { o.BootDir, o.Compression = gzipOnlyBoot, LZ4 }, ErrCompressionUnsupported},
		{"unknown compression", func(o *Options) { o.Compression = "xz" }, ErrCompressionUnsupported},
		{"agent is a script", func(o *Options) { o.AgentPath = script }, ErrBadAgent},
		{"no agent", func(o *Options) { o.AgentPath = "" }, ErrBadAgent},
		{"unknown kernel version", func(o *Options) { o.KernelVersion = "9.9.9" }, ErrNoKernel},
		{"no kernels at all", func(o *Options) { o.BootDir = t.TempDir() }, ErrNoKernel},
		{"extra replaces /init", func(o *Options) { o.Extra = map[string]string{"/init": script} }, ErrBadExtra},
		{"extra below a file", func(o *Options) { o.Extra = map[string]string{"/init/x": script} }, ErrBadExtra},
		{"extra is a directory", func(o *Options) { o.Extra = map[string]string{"/x": t.TempDir()} }, ErrBadExtra},
		{"extra is missing", func(o *Options) { o.Extra = map[string]string{"/x": "/nonexistent"} }, ErrBadExtra},
		{"extra at the root", func(o *Options) { o.Extra = map[string]string{"/": script} }, ErrBadExtra},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := fakeOptions(t)
			tt.modify(&opts)
			_, err := Build(context.Background(), opts)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if names := dirNames(t, opts.OutDir); len(names) != 0 {
				t.Errorf("a failed build left %q", names)
			}
		})
	}
}

// The default compression is the kernel's best: lz4 where its config has
// CONFIG_RD_LZ4=y, gzip (which every kernel has) otherwise.
func TestBuildDefaultCompression(t *testing.T) {
	gzipOnlyBoot := t.TempDir()
	copyFile(t, "testdata/boot/vmlinuz-6.0.0-test", filepath.Join(gzipOnlyBoot, "vmlinuz-6.0.0-test"))
	if err := os.WriteFile(filepath.Join(gzipOnlyBoot, "config-6.0.0-test"), []byte("CONFIG_RD_GZIP=y\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for bootDir, want := range map[string]Compression{"testdata/boot": LZ4, gzipOnlyBoot: Gzip} {
		opts := fakeOptions(t)
		opts.BootDir = bootDir
		res, err := Build(context.Background(), opts)
		if err != nil {
			t.Fatal(err)
		}
		if res.Compression != want {
			t.Errorf("%s: compression %q, want %q", bootDir, res.Compression, want)
		}
		readArchive(t, res.InitramfsPath) // decompresses as it says
		if want == LZ4 {
			b, _ := os.ReadFile(res.InitramfsPath)
			if len(b)%4 != 0 || !bytes.HasSuffix(b, make([]byte, 4)) {
				t.Errorf("lz4 archive of %d bytes ends % x: want a zero block size, padded to 4 bytes", len(b), b[max(0, len(b)-8):])
			}
		}
	}
}

func TestBuildCanceled(t *testing.T) {
	opts := fakeOptions(t)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Build(ctx, opts); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if names := dirNames(t, opts.OutDir); len(names) != 0 {
		t.Errorf("a canceled build left %q", names)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
