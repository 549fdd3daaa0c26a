package tftp

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// DefaultDir is where Debian's ipxe package installs the iPXE binaries.
const DefaultDir = "/usr/lib/ipxe"

// defaultFiles are the iPXE binaries a PXE firmware is pointed at: BIOS
// (undionly.kpxe), UEFI x86-64 (snponly.efi uses the firmware's NIC driver,
// ipxe.efi brings its own) and their arm64 builds where installed. Names not
// present on disk are simply answered "file not found".
var defaultFiles = []string{
	"undionly.kpxe",
	"snponly.efi",
	"ipxe.efi",
	"snponly-arm64.efi",
	"ipxe-arm64.efi",
}

// ErrNotFound is what every refused read request gets: unknown names,
// paths, traversal attempts and allowed names missing on disk alike, so a
// probing client learns nothing about the file system.
var ErrNotFound = errors.New("file not found")

// allowList is the exact set of basenames the server hands out.
type allowList map[string]bool

func newAllowList(names []string) (allowList, error) {
	if len(names) == 0 {
		names = defaultFiles
	}
	allowed := make(allowList, len(names))
	for _, name := range names {
		if !isPlainBasename(name) {
			return nil, fmt.Errorf("tftp: allowed file %q is not a plain file name", name)
		}
		allowed[name] = true
	}
	return allowed, nil
}

// isPlainBasename rejects anything that could name another directory.
func isPlainBasename(name string) bool {
	return name != "" && name != "." && name != ".." &&
		!strings.ContainsAny(name, `/\`+"\x00") && fs.ValidPath(name)
}

// symlinkFS reads files of one directory, following symlinks. os.Root would
// be stricter, but Debian's /usr/lib/ipxe/ipxe.efi is a symlink to
// /boot/ipxe.efi; since only exact allow-listed basenames ever reach Open,
// a request cannot name anything the operator did not put there.
type symlinkFS struct{ dir string }

func (d symlinkFS) Open(name string) (fs.File, error) {
	if !isPlainBasename(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	return os.Open(filepath.Join(d.dir, name))
}

// DefaultFiles lists the basenames served when Config.Files is empty.
func DefaultFiles() []string { return slices.Clone(defaultFiles) }
