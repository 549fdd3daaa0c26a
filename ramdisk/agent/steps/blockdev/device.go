// Package blockdev opens a disk (a block device, or a regular file standing
// in for one in tests) for the agent's steps: its size and sector size,
// positioned writes that refuse to run past the end, fast zeroing
// (BLKZEROOUT, fallocate) with a plain-write fallback, discard, and a
// partition table re-read.
package blockdev

import (
	"context"
	"errors"
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Device is an open disk.
type Device struct {
	f          *os.File
	path       string
	size       int64
	sectorSize int
	block      bool
	zeros      []byte // for zeroing with writes
}

// ErrPastEnd is a write beyond the end of the device.
var ErrPastEnd = errors.New("write past the end of the device")

// zeroChunk bounds one BLKZEROOUT or write when zeroing, so that a
// cancelled context is seen within a fraction of a second.
const zeroChunk = 64 << 20

// Open opens path read-write. A block device is opened exclusively
// (O_EXCL), which fails while it or one of its partitions is mounted or
// otherwise held.
func Open(path string) (*Device, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	d := &Device{path: path, sectorSize: 512, block: st.Mode&unix.S_IFMT == unix.S_IFBLK}
	flags := os.O_RDWR
	if d.block {
		flags |= unix.O_EXCL
	}
	f, err := os.OpenFile(path, flags, 0)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	d.f = f
	if d.block {
		var size uint64
		if err := ioctlPtr(f, unix.BLKGETSIZE64, unsafe.Pointer(&size)); err != nil {
			f.Close()
			return nil, fmt.Errorf("%s: size: %w", path, err)
		}
		d.size = int64(size)
		var ss int32
		if err := ioctlPtr(f, unix.BLKSSZGET, unsafe.Pointer(&ss)); err == nil && ss >= 512 {
			d.sectorSize = int(ss)
		}
	} else {
		fi, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		d.size = fi.Size()
	}
	return d, nil
}

func ioctlPtr(f *os.File, req uint, arg unsafe.Pointer) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno unix.Errno
	if err := rc.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, uintptr(req), uintptr(arg))
	}); err != nil {
		return err
	}
	if errno != 0 {
		return errno
	}
	return nil
}

// Path is the device's path.
func (d *Device) Path() string { return d.path }

// Size in bytes.
func (d *Device) Size() int64 { return d.size }

// SectorSize is the logical sector size (512 for files).
func (d *Device) SectorSize() int { return d.sectorSize }

// IsBlockDevice tells a real disk from a file.
func (d *Device) IsBlockDevice() bool { return d.block }

// File is the open file, for libraries that take one.
func (d *Device) File() *os.File { return d.f }

// ReadOnly reports the kernel's read-only flag (BLKROGET).
func (d *Device) ReadOnly() bool {
	if !d.block {
		return false
	}
	var ro int32
	return ioctlPtr(d.f, unix.BLKROGET, unsafe.Pointer(&ro)) == nil && ro != 0
}

// WriteAt writes p at off, refusing to go past the end of the device.
func (d *Device) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > d.size {
		return 0, fmt.Errorf("%w: %d bytes at %d, %s has %d", ErrPastEnd, len(p), off, d.path, d.size)
	}
	return d.f.WriteAt(p, off)
}

// ReadAt reads from the device.
func (d *Device) ReadAt(p []byte, off int64) (int, error) { return d.f.ReadAt(p, off) }

// ZeroRange makes [off, off+n) read as zeros: BLKZEROOUT on a block device
// (offloaded as write-zeroes when the device can), fallocate on a file,
// else plain writes. done, when set, is told the bytes zeroed so far.
func (d *Device) ZeroRange(ctx context.Context, off, n int64, done func(int64)) error {
	if off < 0 || n < 0 || off+n > d.size {
		return fmt.Errorf("%w: zeroing %d bytes at %d, %s has %d", ErrPastEnd, n, off, d.path, d.size)
	}
	fast := true
	var total int64
	var prev [2]int64 // the chunk written before, to wait for
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		chunk := min(n, zeroChunk)
		var err error
		if fast {
			err = d.zeroFast(off, chunk)
			if err != nil {
				fast = false
				continue // retry this chunk with writes
			}
		} else {
			err = d.writeZeros(ctx, off, chunk)
			if err == nil {
				// Keep at most two chunks in the page cache.
				_ = d.syncRange(off, chunk, false)
				if prev[1] > 0 {
					_ = d.syncRange(prev[0], prev[1], true)
				}
				prev = [2]int64{off, chunk}
			}
		}
		if err != nil {
			return err
		}
		off += chunk
		n -= chunk
		total += chunk
		if done != nil {
			done(total)
		}
	}
	return nil
}

// zeroFast zeroes without sending zeros from memory; an error means the
// device cannot, not that the data is unchanged.
func (d *Device) zeroFast(off, n int64) error {
	ss := int64(d.sectorSize)
	if off%ss != 0 || n%ss != 0 {
		return errors.ErrUnsupported
	}
	if d.block {
		r := [2]uint64{uint64(off), uint64(n)}
		return ioctlPtr(d.f, unix.BLKZEROOUT, unsafe.Pointer(&r))
	}
	rc, err := d.f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		ferr = unix.Fallocate(int(fd), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		if ferr != nil {
			ferr = unix.Fallocate(int(fd), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
		}
	}); err != nil {
		return err
	}
	return ferr
}

func (d *Device) writeZeros(ctx context.Context, off, n int64) error {
	if d.zeros == nil {
		d.zeros = make([]byte, 1<<20)
	}
	zeros := d.zeros
	for n > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		c := min(n, int64(len(zeros)))
		if _, err := d.f.WriteAt(zeros[:c], off); err != nil {
			return err
		}
		off += c
		n -= c
	}
	return nil
}

// Discard tells the device the range is unused (BLKDISCARD); what it then
// reads is up to the device. Files and devices without discard return an
// error.
func (d *Device) Discard(off, n int64) error {
	if !d.block {
		return errors.ErrUnsupported
	}
	r := [2]uint64{uint64(off), uint64(n)}
	return ioctlPtr(d.f, unix.BLKDISCARD, unsafe.Pointer(&r))
}

// Sync flushes written data to the device.
func (d *Device) Sync() error { return d.f.Sync() }

// RereadPartitions asks the kernel to read the partition table again
// (BLKRRPART). It fails while a partition is in use, on a disk without
// partition support (a loop device without partscan) and on files.
func (d *Device) RereadPartitions() error {
	if !d.block {
		return errors.ErrUnsupported
	}
	return ioctlPtr(d.f, unix.BLKRRPART, nil)
}

// syncRange starts writeback of a range (wait=false) or waits until it is
// on the device (wait=true), bounding how much written data sits in the
// page cache.
func (d *Device) syncRange(off, n int64, wait bool) error {
	flags := unix.SYNC_FILE_RANGE_WRITE
	if wait {
		flags |= unix.SYNC_FILE_RANGE_WAIT_BEFORE | unix.SYNC_FILE_RANGE_WAIT_AFTER
	}
	rc, err := d.f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = unix.SyncFileRange(int(fd), off, n, flags) }); err != nil {
		return err
	}
	return serr
}

// Close closes the device.
func (d *Device) Close() error { return d.f.Close() }

func (d *Device) pastEnd(n, off int64) error {
	return fmt.Errorf("%w: %d bytes at %d, %s has %d", ErrPastEnd, n, off, d.path, d.size)
}
