package swraid

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"castiron/ramdisk/protocol"
)

// MdadmPath is where the ramdisk carries Debian's mdadm (make ramdisk puts
// it there, with the libraries it links, from the Debian package).
//
// Why mdadm rather than the kernel's md interface from Go: the kernel can
// assemble and run arrays from sysfs/ioctls, but a new array with a v1.x
// superblock needs that superblock written first, in user space (device
// roles, checksums, data offsets, the bitmap), which is mdadm's job. A
// hand-written copy of that on-disk format would be new code where a
// mistake loses data, against the tool every distribution ships and
// IPA itself calls.
const MdadmPath = "/sbin/mdadm"

// MD runs mdadm and reads the md arrays from sysfs.
type MD struct {
	Bin string // mdadm
	Sys string // /sys
	Dev string // /dev
	Log *slog.Logger
}

// Find returns the ramdisk's mdadm, or nil when this system has none (or
// no md driver): software RAID steps then fail with a clear error, and
// write_image sees no arrays.
func Find(log *slog.Logger) *MD {
	if _, err := os.Stat(MdadmPath); err != nil {
		return nil
	}
	return &MD{Bin: MdadmPath, Sys: "/sys", Dev: "/dev", Log: log}
}

func (m *MD) run(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, m.Bin, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	text := strings.TrimSpace(out.String())
	if m.Log != nil {
		m.Log.Info("mdadm", "args", strings.Join(args, " "), "output", text, "error", err)
	}
	if err != nil {
		if text != "" {
			return text, fmt.Errorf("%w: %s", err, text)
		}
		return text, err
	}
	return text, nil
}

// Create builds the planned arrays: metadata 1.0 (see the package
// comment), named with homehost "any" so that any ramdisk assembles them
// under /dev/md/<name>. --run and --force answer mdadm's questions (a
// member holding an old partition table, a degraded start) as IPA's
// create_raid_device does. The initial resync runs in the background;
// md records its progress and resumes it at the next assembly.
func (m *MD) Create(ctx context.Context, arrays []Array) error {
	for _, a := range arrays {
		args := []string{"--create", a.Device(), "--run", "--force", "--metadata=1.0", "--homehost=any",
			"--name=" + a.Name, "--level=" + Levels[a.Level], "--raid-devices=" + strconv.Itoa(len(a.Members))}
		if a.SizeKiB > 0 {
			args = append(args, "--size="+strconv.FormatInt(a.SizeKiB, 10))
		}
		args = append(args, a.Members...)
		if _, err := m.run(ctx, args...); err != nil {
			return fmt.Errorf("Failed to create md device %s on %s: %v", a.Device(), strings.Join(a.Members, " "), err)
		}
	}
	return nil
}

// Found is an md array running on this system.
type Found struct {
	Kernel  string // /dev/md127
	Path    string // /dev/md/<name>, or Kernel for an array without a name
	Name    string
	Level   string // md's: raid1, raid0, ...
	Size    int64
	Members []string // /dev/vda, ...
}

// Disk is the array as a disk root device hints can pick.
func (f Found) Disk() protocol.Disk {
	return protocol.Disk{Name: f.Path, Model: "md " + f.Level, Size: f.Size}
}

// Assemble starts every array whose members carry a superblock (as IPA's
// delete_configuration and deploy do: mdadm --assemble --scan; an exit
// status that only says there was nothing to assemble is no error), with
// --run so that an array missing a member still starts, then lists them.
func (m *MD) Assemble(ctx context.Context) ([]Found, error) {
	if _, err := m.run(ctx, "--assemble", "--scan", "--run"); err != nil && ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return m.Arrays(ctx)
}

// Arrays lists the running md arrays from /sys/block, with their names
// (mdadm --detail) and members, and makes sure /dev/md/<name> points at
// each (mdadm makes that link itself only where udev does not run).
func (m *MD) Arrays(ctx context.Context) ([]Found, error) {
	entries, err := os.ReadDir(filepath.Join(m.Sys, "block"))
	if err != nil {
		return nil, err
	}
	var out []Found
	for _, e := range entries {
		k := e.Name()
		if !strings.HasPrefix(k, "md") {
			continue
		}
		dir := filepath.Join(m.Sys, "block", k)
		sectors, _ := strconv.ParseInt(readLine(filepath.Join(dir, "size")), 10, 64)
		if sectors == 0 {
			continue // an inactive or stopped array
		}
		f := Found{Kernel: filepath.Join(m.Dev, k), Path: filepath.Join(m.Dev, k), Size: sectors * 512,
			Level: readLine(filepath.Join(dir, "md", "level"))}
		slaves, _ := os.ReadDir(filepath.Join(dir, "slaves"))
		for _, s := range slaves {
			f.Members = append(f.Members, filepath.Join(m.Dev, s.Name()))
		}
		if detail, err := m.run(ctx, "--detail", "--export", f.Kernel); err == nil {
			for _, line := range strings.Split(detail, "\n") {
				if v, ok := strings.CutPrefix(line, "MD_NAME="); ok {
					_, f.Name, _ = strings.Cut(v, ":")
					if f.Name == "" {
						f.Name = v
					}
				}
			}
		}
		if f.Name != "" && !strings.ContainsAny(f.Name, "/ ") {
			link := filepath.Join(m.Dev, "md", f.Name)
			if target, err := filepath.EvalSymlinks(link); err != nil || target != f.Kernel {
				_ = os.MkdirAll(filepath.Dir(link), 0o755)
				_ = os.Remove(link)
				if err := os.Symlink("../"+k, link); err != nil {
					return nil, fmt.Errorf("linking %s to %s: %w", link, f.Kernel, err)
				}
			}
			f.Path = link
		}
		out = append(out, f)
	}
	return out, nil
}

// Delete is IPA's delete_configuration: every array assembled and
// stopped, and the md superblock of every member (and of any disk of
// disks that still carries one, e.g. a member of an array too broken to
// start) zeroed. It returns the arrays it removed.
func (m *MD) Delete(ctx context.Context, disks []string) ([]string, error) {
	found, err := m.Assemble(ctx)
	if err != nil {
		return nil, err
	}
	var removed, members []string
	for _, f := range found {
		if _, err := m.run(ctx, "--stop", f.Kernel); err != nil {
			return removed, fmt.Errorf("Could not stop md device %s: %v", f.Kernel, err)
		}
		removed = append(removed, f.Path)
		members = append(members, f.Members...)
	}
	for _, d := range disks {
		if ok, _ := IsMember(d); ok && !slices.Contains(members, d) {
			members = append(members, d)
		}
	}
	for _, d := range members {
		if _, err := m.run(ctx, "--zero-superblock", d); err != nil {
			return removed, fmt.Errorf("Could not erase the md superblock of %s: %v", d, err)
		}
	}
	if found, err := m.Arrays(ctx); err == nil && len(found) > 0 {
		var left []string
		for _, f := range found {
			left = append(left, f.Path)
		}
		return removed, fmt.Errorf("Unable to clean all softraid correctly. Remaining %s", strings.Join(left, ", "))
	}
	return removed, nil
}

// mdMagic is the md superblock magic (MD_SB_MAGIC).
const mdMagic = 0xa92b4efc

// IsMember reports whether the device holds an md superblock of any
// version: 1.1 at 0, 1.2 at 4 KiB, 1.0 near the end (mdadm's super1
// placement: 8 KiB before the end, rounded down to 4 KiB), 0.90 in the
// last 64 KiB-aligned 64 KiB. IPA's erase steps skip such disks
// (_is_linux_raid_member), and delete_configuration finds them.
func IsMember(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return false, err
	}
	return HasSuperblock(f, size)
}

// HasSuperblock is IsMember for any reader of the given size.
func HasSuperblock(r io.ReaderAt, size int64) (bool, error) {
	sectors := size / 512
	offsets := []int64{0, 4096}
	if sectors > 16 {
		offsets = append(offsets, ((sectors-16)&^7)*512)
	}
	if sectors >= 256 {
		offsets = append(offsets, ((sectors&^127)-128)*512)
	}
	var buf [4]byte
	for _, off := range offsets {
		if off < 0 || off+4 > size {
			continue
		}
		if _, err := r.ReadAt(buf[:], off); err != nil && !errors.Is(err, io.EOF) {
			return false, err
		}
		if binary.LittleEndian.Uint32(buf[:]) == mdMagic {
			return true, nil
		}
	}
	return false, nil
}

func readLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
