//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"
)

// The test OS image: a bootable BIOS disk (MBR, one ext4 partition with
// extlinux, Debian's kernel and a tiny initramfs) whose /init prints
// DeployMarker and a per-run token on the console, then powers the machine
// off. A deploy test that sees the marker knows its image, written by the
// agent, booted from the VM's disk.

// DeployMarker starts the line the image's /init prints.
const DeployMarker = "E2E-DEPLOYED-OK"

const (
	imageSize      = 64 << 20 // raw disk image, sparse
	imagePartStart = 1 << 20  // first partition at sector 2048
	// imageBigSize is the padded raw variant for tests that must catch
	// write_image while it runs.
	imageBigSize = 256 << 20
	mbrBootCode  = "/usr/lib/syslinux/mbr/mbr.bin"
	// imageKernel is Debian's kernel (linux-image-amd64); CASTIRON_E2E_KERNEL
	// overrides it.
	imageKernel = "/boot/vmlinuz-6.1.0-56-amd64"
)

// DeployImage is one file castiron serves under /images/<Name>.
type DeployImage struct {
	Name   string // instance_info.image_source
	Path   string
	Format string // instance_info.image_disk_format: raw, qcow2, gzip, zstd
	SHA256 string // instance_info.image_os_hash_value (of the file as served)
	Size   int64  // bytes of the file
}

// DeployImages are the variants of one build of the test OS image.
type DeployImages struct {
	Marker string // the whole line /init prints: "E2E-DEPLOYED-OK <token>"
	Raw    DeployImage
	QCOW2  DeployImage
	Gzip   DeployImage
	Zstd   DeployImage

	dir     string
	bigOnce sync.Once
	big     DeployImage
	bigErr  error
	sbOnce  sync.Once
	sb      DeployImage
	sbErr   error
}

// deployImages is the build shared by every test of this run.
var deployImages struct {
	once sync.Once
	im   *DeployImages
	err  error
}

// requireImageTools checks what BuildDeployImages runs: root for the loop
// mount, the partitioning, file system and bootloader tools, the kernel.
func requireImageTools(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		unavailable(t, "building the test OS image needs root (loop mount for extlinux)")
	}
	for _, tool := range []string{"go", "sfdisk", "mkfs.ext4", "losetup", "mount", "umount", "extlinux", "cpio", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "missing %s (Debian packages: fdisk e2fsprogs mount extlinux cpio qemu-utils)", tool)
		}
	}
	if _, err := os.Stat(mbrBootCode); err != nil {
		unavailable(t, "missing %s (Debian package syslinux-common)", mbrBootCode)
	}
	if _, err := os.Stat(imageKernelPath()); err != nil {
		unavailable(t, "no kernel for the test image (Debian package linux-image-amd64, or CASTIRON_E2E_KERNEL): %v", err)
	}
}

func imageKernelPath() string {
	if k := os.Getenv("CASTIRON_E2E_KERNEL"); k != "" {
		return k
	}
	return imageKernel
}

// BuildDeployImages builds the test OS image and its variants once per test
// binary run (into the suite's temp dir) and returns them.
func BuildDeployImages(t testing.TB) *DeployImages {
	t.Helper()
	requireImageTools(t)
	deployImages.once.Do(func() {
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		dir := filepath.Join(shared.dir, "images")
		deployImages.im, deployImages.err = buildDeployImages(ctx, dir, "e2e-"+randHex(8))
		if deployImages.err == nil {
			t.Logf("built the test OS image and its variants in %s in %.1fs", dir, time.Since(start).Seconds())
		}
	})
	if deployImages.err != nil {
		t.Fatalf("test OS image: %v", deployImages.err)
	}
	return deployImages.im
}

func buildDeployImages(ctx context.Context, dir, token string) (*DeployImages, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	initrd := filepath.Join(dir, "initrd.gz")
	if err := buildMarkerInitramfs(ctx, dir, token, initrd); err != nil {
		return nil, fmt.Errorf("initramfs: %w", err)
	}
	im := &DeployImages{Marker: DeployMarker + " " + token, dir: dir}
	raw := filepath.Join(dir, "e2e-os.raw")
	if err := buildBootDisk(ctx, dir, raw, initrd); err != nil {
		return nil, fmt.Errorf("disk image: %w", err)
	}
	var err error
	if im.Raw, err = describeImage(raw, "raw"); err != nil {
		return nil, err
	}
	qcow := filepath.Join(dir, "e2e-os.qcow2")
	if _, err := run(ctx, "qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, qcow); err != nil {
		return nil, err
	}
	if im.QCOW2, err = describeImage(qcow, "qcow2"); err != nil {
		return nil, err
	}
	gz := filepath.Join(dir, "e2e-os.raw.gz")
	if err := compressFile(raw, gz, func(w io.Writer) (io.WriteCloser, error) {
		return gzip.NewWriterLevel(w, gzip.BestSpeed)
	}); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if im.Gzip, err = describeImage(gz, "gzip"); err != nil {
		return nil, err
	}
	zst := filepath.Join(dir, "e2e-os.raw.zst")
	if err := compressFile(raw, zst, func(w io.Writer) (io.WriteCloser, error) {
		return zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest))
	}); err != nil {
		return nil, fmt.Errorf("zstd: %w", err)
	}
	if im.Zstd, err = describeImage(zst, "zstd"); err != nil {
		return nil, err
	}
	// The variants are copies of the raw file as hashed above: it must not
	// have changed meanwhile (see populateBootFS for what once did that).
	again, err := describeImage(raw, "raw")
	if err != nil {
		return nil, err
	}
	if again.SHA256 != im.Raw.SHA256 {
		return nil, fmt.Errorf("%s changed while its variants were built (sha256 %s, then %s)", raw, im.Raw.SHA256, again.SHA256)
	}
	// Every test only reads them (boots use snapshot=on or copies).
	for _, v := range []DeployImage{im.Raw, im.QCOW2, im.Gzip, im.Zstd} {
		if err := os.Chmod(v.Path, 0o444); err != nil {
			return nil, err
		}
	}
	return im, nil
}

// Big is the raw image padded (sparse) to imageBigSize: the same boot disk,
// but a download that takes long enough to be caught mid-write.
func (im *DeployImages) Big(t testing.TB) DeployImage {
	t.Helper()
	im.bigOnce.Do(func() {
		p := filepath.Join(im.dir, "e2e-os-big.raw")
		if err := copyFileSparse(im.Raw.Path, p); err != nil {
			im.bigErr = err
			return
		}
		if err := os.Truncate(p, imageBigSize); err != nil {
			im.bigErr = err
			return
		}
		im.big, im.bigErr = describeImage(p, "raw")
	})
	if im.bigErr != nil {
		t.Fatalf("big test image: %v", im.bigErr)
	}
	return im.big
}

// buildMarkerInitramfs builds testdata/deployinit (static) and packs it as
// /init with /dev/console into a gzipped newc cpio archive.
func buildMarkerInitramfs(ctx context.Context, dir, token, out string) error {
	stage := filepath.Join(dir, "initramfs")
	if err := os.RemoveAll(stage); err != nil {
		return err
	}
	for _, d := range []string{"dev", "proc", "sys"} {
		if err := os.MkdirAll(filepath.Join(stage, d), 0o755); err != nil {
			return err
		}
	}
	// The kernel opens /dev/console for init's stdio before anything mounts
	// devtmpfs: the archive must carry the node (c 5 1).
	if err := unix.Mknod(filepath.Join(stage, "dev", "console"), unix.S_IFCHR|0o600, int(unix.Mkdev(5, 1))); err != nil {
		return fmt.Errorf("mknod /dev/console: %w", err)
	}
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X main.token="+token,
		"-o", filepath.Join(stage, "init"), "./testdata/deployinit")
	build.Dir = wd // tests/e2e, inside the castiron module
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH=amd64")
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build deployinit: %w: %s", err, b)
	}

	var names []string
	err = filepath.WalkDir(stage, func(p string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(stage, p)
		if err == nil && rel != "." {
			names = append(names, rel)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	pack := exec.CommandContext(ctx, "cpio", "--quiet", "-o", "-H", "newc", "-R", "0:0")
	pack.Dir = stage
	pack.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	pack.Stdout, pack.Stderr = zw, &stderr
	if err := pack.Run(); err != nil {
		return fmt.Errorf("cpio: %w: %s", err, stderr.Bytes())
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}

// InstallImage puts img where castiron serves it (<data-dir>/images/<name>):
// a hard link when the suite's temp dir is on the same file system, else a
// sparse copy.
func (c *Castiron) InstallImage(t testing.TB, img DeployImage) {
	t.Helper()
	dir := filepath.Join(c.DataDir, "images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, img.Name)
	_ = os.Remove(dst)
	if err := os.Link(img.Path, dst); err != nil {
		if err := copyFileSparse(img.Path, dst); err != nil {
			t.Fatalf("install image %s: %v", img.Name, err)
		}
	}
}

// TestDeployImageBoots boots the test OS image in a bare qemu (no network,
// no castiron) the way the lab's VM boots a disk after a root-device-hint
// deploy: an empty first disk, the image on the second, SeaBIOS. It must
// print the marker and power off. It also checks that the qcow2, gzip and
// zstd variants hold the same disk.
func TestDeployImageBoots(t *testing.T) {
	im := BuildDeployImages(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		unavailable(t, "missing qemu-system-x86_64 (Debian package qemu-system-x86)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	t.Run("variants", func(t *testing.T) {
		if _, err := run(ctx, "qemu-img", "compare", "-f", "raw", "-F", "qcow2", im.Raw.Path, im.QCOW2.Path); err != nil {
			t.Errorf("qcow2 variant: %v", err)
		}
		for _, v := range []struct {
			img  DeployImage
			open func(io.Reader) (io.Reader, error)
		}{
			{im.Gzip, func(r io.Reader) (io.Reader, error) { return gzip.NewReader(r) }},
			{im.Zstd, func(r io.Reader) (io.Reader, error) {
				d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
				if err != nil {
					return nil, err
				}
				return d.IOReadCloser(), nil // Close releases the decoder
			}},
		} {
			sum, err := decompressedSHA256(v.img.Path, v.open)
			if err != nil || sum != im.Raw.SHA256 {
				t.Errorf("%s variant: sha256 of its content %s (%v), raw image %s", v.img.Format, sum, err, im.Raw.SHA256)
			}
		}
		for _, v := range []DeployImage{im.Raw, im.QCOW2, im.Gzip, im.Zstd} {
			t.Logf("image %-16s %-5s %10d bytes sha256 %s", v.Name, v.Format, v.Size, v.SHA256)
		}
	})

	t.Run("boot", func(t *testing.T) {
		dir := t.TempDir()
		empty := filepath.Join(dir, "empty.raw")
		if err := sparseFile(empty, 1<<30); err != nil {
			t.Fatal(err)
		}
		serial := filepath.Join(dir, "serial.log")
		sercon := filepath.Join(dir, "sercon-port")
		if err := os.WriteFile(sercon, []byte{0xf8, 0x03}, 0o644); err != nil { // SeaBIOS messages on COM1
			t.Fatal(err)
		}
		// ~12 s on TCG; SeaBIOS waits 60 s before retrying a failed boot.
		bootCtx, bootCancel := context.WithTimeout(ctx, 90*time.Second)
		defer bootCancel()
		start := time.Now()
		qemu := exec.CommandContext(bootCtx, "qemu-system-x86_64",
			"-name", "e2e-imageboot-"+randHex(4), "-machine", "pc", "-accel", "tcg", "-m", "256",
			"-nodefaults", "-display", "none", "-no-reboot", "-boot", "strict=on",
			"-fw_cfg", "name=etc/sercon-port,file="+sercon,
			"-drive", "file="+empty+",if=none,id=d0,format=raw,readonly=on",
			"-device", "virtio-blk-pci,drive=d0,serial=E2EDISK0,bootindex=2",
			"-drive", "file="+im.Raw.Path+",if=none,id=d1,format=raw,snapshot=on",
			"-device", "virtio-blk-pci,drive=d1,serial=E2EDISK1,bootindex=1",
			"-serial", "file:"+serial)
		out, err := qemu.CombinedOutput()
		took := time.Since(start)
		log, _ := os.ReadFile(serial)
		if err != nil {
			t.Fatalf("qemu: %v (%s) after %.1fs; serial console:\n%s", err, bytes.TrimSpace(out), took.Seconds(), tailBytes(log, 40))
		}
		if !bytes.Contains(log, []byte(im.Marker)) {
			t.Fatalf("the image powered off without printing %q; serial console:\n%s", im.Marker, tailBytes(log, 40))
		}
		t.Logf("E2E-TIMING image_boot total=%.2fs (qemu start to power off, marker seen)", took.Seconds())
	})
}

func tailBytes(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
