package iso

import (
	"fmt"
	"io"
	"os"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
)

// efiBootPath is where UEFI firmware looks for the boot loader of a
// removable medium on x86_64.
const efiBootPath = "/EFI/BOOT/BOOTX64.EFI"

// efiImage is the El Torito EFI boot image: a FAT12 file system holding
// only GRUB (it reads kernel and initramfs from the ISO 9660 tree), sized
// to GRUB plus slack, rounded up to a MiB. FAT12, not FAT32: firmware
// decides the FAT type by the cluster count, and an image this small has
// too few clusters to be read as FAT32.
func efiImage(grub string) ([]byte, error) {
	src, err := os.Open(grub)
	if err != nil {
		return nil, fmt.Errorf("iso: EFI loader: %w", err)
	}
	defer src.Close()
	st, err := src.Stat()
	if err != nil {
		return nil, fmt.Errorf("iso: EFI loader: %w", err)
	}
	const mib = 1 << 20
	size := (st.Size() + st.Size()/8 + 256<<10 + mib - 1) / mib * mib
	if size > fat12.Fat12MaxSize {
		return nil, fmt.Errorf("iso: EFI loader %s is %d bytes, too big for the EFI image", grub, st.Size())
	}
	tmp, err := os.CreateTemp("", "castiron-efiboot-*.img")
	if err != nil {
		return nil, fmt.Errorf("iso: %w", err)
	}
	defer func() {
		tmp.Close()
		os.Remove(tmp.Name())
	}()
	if err := tmp.Truncate(size); err != nil {
		return nil, fmt.Errorf("iso: %w", err)
	}
	fs, err := fat12.Create(file.New(tmp, false), size, 0, 512, "EFIBOOT", true)
	if err != nil {
		return nil, fmt.Errorf("iso: EFI image: %w", err)
	}
	for _, d := range []string{"/EFI", "/EFI/BOOT"} {
		if err := fs.Mkdir(d); err != nil {
			return nil, fmt.Errorf("iso: EFI image: %w", err)
		}
	}
	dst, err := fs.OpenFile(efiBootPath, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return nil, fmt.Errorf("iso: EFI image: %w", err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		return nil, fmt.Errorf("iso: EFI image: %w", err)
	}
	if err := dst.Close(); err != nil {
		return nil, fmt.Errorf("iso: EFI image: %w", err)
	}
	return os.ReadFile(tmp.Name())
}
