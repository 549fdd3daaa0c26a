//go:build e2e

package e2e

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
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

// extlinuxConf boots the kernel with the marker initramfs on the serial
// console; panic=-1 reboots at once should /init ever fail.
const extlinuxConf = `DEFAULT linux
TIMEOUT 1
SERIAL 0 115200
LABEL linux
  KERNEL /vmlinuz
  APPEND initrd=/initrd.gz console=ttyS0,115200 panic=-1
`

// buildBootDisk writes a sparse raw BIOS boot disk: MBR with syslinux's
// boot code, one active Linux partition at 1 MiB holding an ext4 file system
// with extlinux, the kernel and initrd. The file system is made and
// populated through a loop device over the partition's byte range (no
// partition scan needed); extlinux takes the partition's offset from the
// MBR's hand-off at boot.
//
// The file is final when this returns: the file system was mounted only in
// a private mount namespace (populateBootFS) and the loop device is gone
// (detachLoop), so nothing can write to it later.
func buildBootDisk(ctx context.Context, dir, out, initrd string) (err error) {
	_ = os.Remove(out)
	if err := sparseFile(out, imageSize); err != nil {
		return err
	}
	layout := fmt.Sprintf("label: dos\nstart=%d, type=83, bootable\n", imagePartStart/512)
	sf := exec.CommandContext(ctx, "sfdisk", "--quiet", out)
	sf.Stdin = strings.NewReader(layout)
	if b, err := sf.CombinedOutput(); err != nil {
		return fmt.Errorf("sfdisk: %w: %s", err, b)
	}
	conf := filepath.Join(dir, "extlinux.conf")
	if err := os.WriteFile(conf, []byte(extlinuxConf), 0o644); err != nil {
		return err
	}

	loop, err := run(ctx, "losetup", "--find", "--show",
		"--offset", strconv.Itoa(imagePartStart), "--sizelimit", strconv.Itoa(imageSize-imagePartStart), out)
	if err != nil {
		return err
	}
	loop = strings.TrimSpace(loop)
	attached := true
	defer func() {
		if attached {
			// A fresh context: the loop device must go even when ctx expired.
			dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = detachLoop(dctx, loop, out)
		}
	}()
	// No 64bit/metadata_csum: extlinux 6.04 predates them. No lazy init:
	// mkfs writes the inode tables and journal now, so the kernel's
	// ext4lazyinit thread has nothing to write while it is mounted.
	if _, err := run(ctx, "mkfs.ext4", "-q", "-F", "-L", "e2eroot", "-O", "^64bit,^metadata_csum",
		"-E", "lazy_itable_init=0,lazy_journal_init=0", loop); err != nil {
		return err
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.MkdirAll(mnt, 0o755); err != nil {
		return err
	}
	if err := populateBootFS(ctx, loop, mnt, map[string]string{
		imageKernelPath(): "vmlinuz", initrd: "initrd.gz", conf: "extlinux.conf",
	}); err != nil {
		return err
	}
	attached = false
	if err := detachLoop(ctx, loop, out); err != nil {
		return err
	}

	code, err := os.ReadFile(mbrBootCode)
	if err != nil {
		return err
	}
	if len(code) > 440 {
		code = code[:440] // boot code only: keep the disk signature and the partition table
	}
	f, err := os.OpenFile(out, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(code, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// populateScript mounts the loop device ($1) on $2, copies each pair of
// (source, name) arguments that follow into it, installs extlinux and
// unmounts. Plain cp, not --sparse: extlinux's ext4 reader fails ("I/O
// error") on a kernel file with holes. extlinux warns that a loop device
// has no geometry; harmless.
const populateScript = `set -eu
loop=$1 mnt=$2
shift 2
mount -t ext4 "$loop" "$mnt"
while [ $# -gt 0 ]; do
	cp "$1" "$mnt/$2"
	shift 2
done
extlinux --install "$mnt"
sync -f "$mnt"
umount "$mnt"
`

// populateBootFS copies files (source path -> name in the root) into the
// ext4 on loop and installs extlinux, all in a mount namespace of its own.
//
// Why not mount in the test's namespace: the host's / is private, so any
// process that unshares its mount namespace while the file system is
// mounted there (another test's `ip netns exec`, unshare -m, a Go child
// with CLONE_NEWNS) takes a private copy of the mount. Our umount then only
// detaches our copy, losetup -d merely sets autoclear, and when that other
// namespace ends the kernel finally unmounts the ext4 and writes its
// superblock (free block count, state) through the still attached loop
// device into the raw image: after its checksum and variants were made.
// A mount that exists only in a namespace nobody else can copy (the shell
// below and its short-lived children) cannot outlive our umount; and if the
// script dies, its namespace and the mount go with it.
func populateBootFS(ctx context.Context, loop, mnt string, files map[string]string) error {
	args := []string{"-c", populateScript, "populate", loop, mnt}
	for src, name := range files {
		args = append(args, src, name)
	}
	cmd := exec.CommandContext(ctx, "sh", args...)
	// Go makes / recursively private in the child after unsharing.
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("populate the boot file system (mount, copy, extlinux, umount): %w: %s", err, bytes.TrimSpace(out))
	}
	return nil
}

// detachLoop detaches loop and waits until the kernel has really let go of
// backing: losetup -d on a device still held open (a file system still
// mounted somewhere) succeeds but only marks it to be cleared at its last
// close, and until then the file can still change under us.
func detachLoop(ctx context.Context, loop, backing string) error {
	if _, err := run(ctx, "losetup", "-d", loop); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for {
		held, err := run(ctx, "losetup", "--associated", backing)
		if err == nil && strings.TrimSpace(held) == "" {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("loop device %s still holds %s after losetup -d (its file system still mounted in some mount namespace?): %s", loop, backing, strings.TrimSpace(held))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// describeImage hashes a file.
func describeImage(path, format string) (DeployImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return DeployImage{}, err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return DeployImage{}, err
	}
	return DeployImage{Name: filepath.Base(path), Path: path, Format: format, SHA256: hex.EncodeToString(h.Sum(nil)), Size: n}, nil
}

func compressFile(src, dst string, newWriter func(io.Writer) (io.WriteCloser, error)) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer out.Close()
	w, err := newWriter(out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(w, in); err != nil {
		return err
	}
	if err := w.Close(); err != nil {
		return err
	}
	return out.Close()
}

// copyFileSparse copies src to dst, leaving holes where src has zero blocks.
func copyFileSparse(src, dst string) error {
	st, err := os.Stat(src)
	if err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := writeNonZero(out, src); err != nil {
		return err
	}
	if err := out.Truncate(st.Size()); err != nil {
		return err
	}
	return out.Close()
}

// WriteImageToDisk writes a raw image over the start of an existing disk
// file, as dd would, except that the image's all-zero 1 MiB blocks are
// skipped: use it on fresh (sparse, all-zero) lab disks only.
func WriteImageToDisk(disk, image string) error {
	out, err := os.OpenFile(disk, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer out.Close()
	if err := writeNonZero(out, image); err != nil {
		return err
	}
	return out.Close()
}

// writeNonZero writes the non-zero 1 MiB blocks of src into out at the same
// offsets.
func writeNonZero(out *os.File, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	buf := make([]byte, 1<<20)
	zero := make([]byte, len(buf))
	var off int64
	for {
		n, rerr := io.ReadFull(in, buf)
		if n > 0 {
			if !bytes.Equal(buf[:n], zero[:n]) {
				if _, err := out.WriteAt(buf[:n], off); err != nil {
					return err
				}
			}
			off += int64(n)
		}
		if errors.Is(rerr, io.EOF) || errors.Is(rerr, io.ErrUnexpectedEOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	return nil
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

func decompressedSHA256(path string, open func(io.Reader) (io.Reader, error)) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	r, err := open(f)
	if err != nil {
		return "", err
	}
	if c, ok := r.(io.Closer); ok {
		defer c.Close()
	}
	h := sha256.New()
	if _, err := io.Copy(h, r); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func tailBytes(b []byte, n int) string {
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}
