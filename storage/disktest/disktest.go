// Package disktest gives tests a small file system to fill: a tmpfs of a
// few MiB mounted for one test (as root; otherwise the test skips, or
// fails under CI=true), and a filler file that takes every free byte of it
// until the test frees it again. It is how the disk-full tests make the
// data directory's disk full without touching the machine's own disks.
package disktest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Small mounts a tmpfs of sizeMiB MiB on a new directory and returns it;
// it is unmounted when the test ends.
func Small(tb testing.TB, sizeMiB int) string {
	tb.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			tb.Fatal("disktest: mounting a tmpfs needs root")
		}
		tb.Skip("disktest: mounting a tmpfs needs root")
	}
	dir := tb.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%dm,mode=0750", sizeMiB)); err != nil {
		if os.Getenv("CI") == "true" {
			tb.Fatalf("disktest: mount tmpfs: %v", err)
		}
		tb.Skipf("disktest: mount tmpfs: %v", err)
	}
	tb.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			tb.Errorf("disktest: unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a file in dir until the file system has no space left and
// returns how many bytes it took and the function that deletes it again.
func Fill(tb testing.TB, dir string) (int64, func()) {
	tb.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 4096)
	var n int64
	for {
		k, err := f.Write(buf)
		n += int64(k)
		if errors.Is(err, syscall.ENOSPC) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	// Single bytes: the last partial page as well.
	for {
		if _, err := f.Write(buf[:1]); err != nil {
			break
		}
		n++
	}
	return n, func() {
		if err := os.Remove(path); err != nil {
			tb.Errorf("disktest: free %s: %v", path, err)
		}
	}
}
