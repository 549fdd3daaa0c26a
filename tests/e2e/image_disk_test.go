//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Disk work for the test OS image: the bootable disk (loop device, ext4,
// extlinux), compressed and sparse copies, and writing an image to a VM's
// disk as the agent would.

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
