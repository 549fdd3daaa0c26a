package iso

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"castiron/ramdisk/initramfs"
)

// Loaders are the boot loader files an ISO is made bootable with, all from
// Debian packages (copied next to the ramdisk by `make ramdisk`, so a host
// without them can still build ISOs):
//
//	ISOLinux  isolinux.bin, the BIOS El Torito boot image (package isolinux)
//	LDLinux   ldlinux.c32, isolinux's second stage (package syslinux-common)
//	GRUBEFI   gcdx64.efi.signed, Debian's monolithic GRUB for CDs (package
//	          grub-efi-amd64-signed): every module it needs is built in, and
//	          its embedded config finds the CD by /.disk/info and sources
//	          /boot/grub/grub.cfg, so kernel and initramfs are read from the
//	          ISO 9660 tree and the EFI image holds only GRUB. It is signed
//	          by Debian, so it also boots under Secure Boot behind shim.
type Loaders struct {
	ISOLinux, LDLinux, GRUBEFI string
}

// File names under a ramdisk directory, as `make ramdisk` writes them.
const (
	ISOLinuxName = "isolinux.bin"
	LDLinuxName  = "ldlinux.c32"
	GRUBEFIName  = "grubx64-cd.efi"
)

// Where Debian installs them.
var (
	hostISOLinux = []string{"/usr/lib/ISOLINUX/isolinux.bin"}
	hostLDLinux  = []string{"/usr/lib/syslinux/modules/bios/ldlinux.c32"}
	hostGRUBEFI  = []string{"/usr/lib/grub/x86_64-efi-signed/gcdx64.efi.signed"}
)

// ErrNoLoaders: a boot loader file is missing everywhere it was looked for.
var ErrNoLoaders = errors.New("iso: boot loader files missing")

// FindLoaders looks for each file in dir (the ramdisk directory; may be
// empty), then where Debian installs it.
func FindLoaders(dir string) (Loaders, error) {
	var l Loaders
	var missing []string
	find := func(dst *string, name string, host []string, pkg string) {
		cands := host
		if dir != "" {
			cands = append([]string{filepath.Join(dir, name)}, host...)
		}
		for _, c := range cands {
			if st, err := os.Stat(c); err == nil && st.Mode().IsRegular() {
				*dst = c
				return
			}
		}
		missing = append(missing, fmt.Sprintf("%s (Debian package %s)", strings.Join(cands, " or "), pkg))
	}
	find(&l.ISOLinux, ISOLinuxName, hostISOLinux, "isolinux")
	find(&l.LDLinux, LDLinuxName, hostLDLinux, "syslinux-common")
	find(&l.GRUBEFI, GRUBEFIName, hostGRUBEFI, "grub-efi-amd64-signed")
	if len(missing) > 0 {
		return Loaders{}, fmt.Errorf("%w: %s; `make ramdisk` copies them next to the ramdisk", ErrNoLoaders, strings.Join(missing, "; "))
	}
	return l, nil
}

// HostLoaders are the Debian paths of the loader files, for `make ramdisk`
// to copy: name under the ramdisk directory -> host path.
func HostLoaders() map[string]string {
	return map[string]string{
		ISOLinuxName: hostISOLinux[0],
		LDLinuxName:  hostLDLinux[0],
		GRUBEFIName:  hostGRUBEFI[0],
	}
}

// CopyLoaders copies the host's loader files into dir (for `make ramdisk`),
// each atomically. Files the host lacks are listed in missing, not an error:
// the ramdisk still network-boots without them.
func CopyLoaders(ctx context.Context, dir string) (copied, missing []string, err error) {
	for _, name := range sortedKeys(HostLoaders()) {
		src := HostLoaders()[name]
		in, err := os.Open(src)
		if errors.Is(err, fs.ErrNotExist) {
			missing = append(missing, src)
			continue
		}
		if err != nil {
			return copied, missing, err
		}
		_, err = initramfs.CreateAtomic(ctx, filepath.Join(dir, name), 0o644, func(f *os.File) error {
			_, err := io.Copy(f, in)
			return err
		})
		in.Close()
		if err != nil {
			return copied, missing, fmt.Errorf("copying %s: %w", src, err)
		}
		copied = append(copied, name)
	}
	return copied, missing, nil
}
