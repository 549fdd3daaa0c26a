//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Checks on the VM's disk files, made while the VM is off (qemu runs the
// disks with cache=unsafe: what the guest wrote is in the host's page cache,
// so reads from here see it).

const sector = 512

// PrefillDisk gives a disk file what a used machine's disk has: a GPT
// (protective MBR, primary and backup header) with one 10 MiB partition, so
// that cleaning has metadata to erase.
func PrefillDisk(t testing.TB, path string) {
	t.Helper()
	if _, err := exec.LookPath("sgdisk"); err != nil {
		unavailable(t, "missing sgdisk (Debian package gdisk)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := run(ctx, "sgdisk", "--clear", "--new=1:0:+10M", "--typecode=1:8300", "--change-name=1:e2e-old", path); err != nil {
		t.Fatalf("prefill %s: %v", path, err)
	}
	found, err := DiskMetadata(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	if len(found) < 3 {
		t.Fatalf("prefill %s: the helper sees only %v, want the protective MBR and both GPT headers", path, found)
	}
}

// DiskMetadata lists the partitioning and file system signatures left on a
// disk file: an MBR boot signature, GPT headers at LBA 1 and at the last
// LBA (what wipefs and sgdisk --zap-all remove), and whatever blkid's low
// level probe finds. Empty means a clean disk.
func DiskMetadata(ctx context.Context, path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	var found []string
	head := make([]byte, 2*sector)
	if _, err := f.ReadAt(head, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if head[510] == 0x55 && head[511] == 0xaa {
		found = append(found, "MBR boot signature (partition table or protective MBR)")
	}
	if bytes.HasPrefix(head[sector:], []byte("EFI PART")) {
		found = append(found, "primary GPT header (LBA 1)")
	}
	last := make([]byte, sector)
	if _, err := f.ReadAt(last, st.Size()-sector); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if bytes.HasPrefix(last, []byte("EFI PART")) {
		found = append(found, "backup GPT header (last LBA)")
	}
	// -p: probe the file itself, no cache; exit 2 = nothing found.
	out, err := exec.CommandContext(ctx, "blkid", "-p", "-o", "export", path).Output()
	var ee *exec.ExitError
	switch {
	case err == nil:
		for _, line := range strings.Fields(string(out)) {
			if strings.HasPrefix(line, "PTTYPE=") || strings.HasPrefix(line, "TYPE=") {
				found = append(found, "blkid "+line)
			}
		}
	case errors.As(err, &ee) && ee.ExitCode() == 2:
	case errors.Is(err, exec.ErrNotFound):
	default:
		return found, fmt.Errorf("blkid -p %s: %w", path, err)
	}
	return found, nil
}

// RequireCleanDisk fails the test when the disk file still has a partition
// table or a file system signature.
func RequireCleanDisk(t testing.TB, path, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	found, err := DiskMetadata(ctx, path)
	if err != nil {
		t.Errorf("%s: %v", when, err)
		return
	}
	if len(found) > 0 {
		t.Errorf("%s: %s still has metadata: %s", when, path, strings.Join(found, "; "))
	}
}

// DiskStartsWith compares the first bytes of a disk file with a raw image
// file, the whole image: nil when the disk holds the image.
func DiskStartsWith(disk, image string) error {
	df, err := os.Open(disk)
	if err != nil {
		return err
	}
	defer df.Close()
	imf, err := os.Open(image)
	if err != nil {
		return err
	}
	defer imf.Close()
	a, b := make([]byte, 1<<20), make([]byte, 1<<20)
	var off int64
	for {
		n, ierr := io.ReadFull(imf, a)
		if n > 0 {
			if _, err := io.ReadFull(df, b[:n]); err != nil {
				return fmt.Errorf("%s ends before the image (at %d): %w", disk, off, err)
			}
			if !bytes.Equal(a[:n], b[:n]) {
				i := 0
				for a[i] == b[i] {
					i++
				}
				return fmt.Errorf("%s differs from the image %s at byte %d", disk, image, off+int64(i))
			}
			off += int64(n)
		}
		if errors.Is(ierr, io.EOF) || errors.Is(ierr, io.ErrUnexpectedEOF) {
			return nil
		}
		if ierr != nil {
			return ierr
		}
	}
}

// DiskZeroRanges reports the first non-zero byte within the given byte
// ranges of a disk file ({offset, length}; a negative offset counts from
// the end), or nil when they are all zero.
func DiskZeroRanges(path string, ranges ...[2]int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for _, r := range ranges {
		off, n := r[0], r[1]
		if off < 0 {
			off += st.Size()
		}
		for n > 0 {
			chunk := min(n, int64(len(buf)))
			if _, err := f.ReadAt(buf[:chunk], off); err != nil {
				return fmt.Errorf("%s at %d: %w", path, off, err)
			}
			if i := firstNonZero(buf[:chunk]); i >= 0 {
				return fmt.Errorf("%s: non-zero data at byte %d", path, off+int64(i))
			}
			off += chunk
			n -= chunk
		}
	}
	return nil
}

func firstNonZero(b []byte) int {
	for i, c := range b {
		if c != 0 {
			return i
		}
	}
	return -1
}

// TestDiskHelpers checks the disk-file helpers the deploy tests rely on,
// on plain files (no VM, no root).
func TestDiskHelpers(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	disk := dir + "/disk.raw"
	if err := sparseFile(disk, 64<<20); err != nil {
		t.Fatal(err)
	}
	if found, err := DiskMetadata(ctx, disk); err != nil || len(found) != 0 {
		t.Fatalf("fresh sparse disk: %v, %v; want nothing", found, err)
	}
	PrefillDisk(t, disk)
	found, _ := DiskMetadata(ctx, disk)
	t.Logf("prefilled: %v", found)

	// Zeroing only the start (MBR + primary GPT) leaves the backup header.
	if err := zeroAt(disk, 0, 34*sector); err != nil {
		t.Fatal(err)
	}
	if found, _ := DiskMetadata(ctx, disk); len(found) != 1 || !strings.Contains(found[0], "backup GPT") {
		t.Errorf("start zeroed: %v, want only the backup GPT header", found)
	}
	if err := zeroAt(disk, 64<<20-33*sector, 33*sector); err != nil {
		t.Fatal(err)
	}
	if found, _ := DiskMetadata(ctx, disk); len(found) != 0 {
		t.Errorf("start and end zeroed: %v, want nothing", found)
	}
	if err := DiskZeroRanges(disk, [2]int64{0, 1 << 20}, [2]int64{-(1 << 20), 1 << 20}); err != nil {
		t.Errorf("DiskZeroRanges after zeroing both GPT areas: %v", err)
	}

	// An "image" of random-looking bytes written at the disk's start.
	image := dir + "/image.raw"
	content := bytes.Repeat([]byte("castiron-e2e-image-"), 100000)
	if err := os.WriteFile(image, content, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := DiskStartsWith(disk, image); err == nil {
		t.Errorf("DiskStartsWith before the write: nil, want a difference")
	}
	f, err := os.OpenFile(disk, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(content, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if err := DiskStartsWith(disk, image); err != nil {
		t.Errorf("DiskStartsWith after the write: %v", err)
	}
	if err := DiskZeroRanges(disk, [2]int64{int64(len(content)), 1 << 20}); err != nil {
		t.Errorf("DiskZeroRanges after the image: %v", err)
	}
	if err := DiskZeroRanges(disk, [2]int64{0, 512}); err == nil {
		t.Errorf("DiskZeroRanges over the image: nil, want an error")
	}
}

func zeroAt(path string, off, n int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(make([]byte, n), off)
	return err
}
