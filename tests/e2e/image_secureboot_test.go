//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	diskfs "github.com/diskfs/go-diskfs"
	"github.com/diskfs/go-diskfs/disk"
	"github.com/diskfs/go-diskfs/filesystem"
	"github.com/diskfs/go-diskfs/partition/gpt"
)

// The Secure Boot variant of the test OS image: a GPT disk whose EFI
// system partition holds Debian's signed boot chain (shim, signed by
// Microsoft; GRUB and the kernel, signed by Debian), the marker initramfs
// (initramfs images are not signed) and GRUB's config. OVMF with
// Microsoft's keys enrolled and Secure Boot enforced boots it; the kernel
// then prints "Secure boot enabled", which is what a deploy test checks.
const (
	shimSigned  = "/usr/lib/shim/shimx64.efi.signed"
	grubSigned  = "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
	ovmfSecure  = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	ovmfMSVars  = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
	sbImageSize = 64 << 20
)

// secureBootGrubCfg: Debian's signed GRUB sources $prefix/grub.cfg
// (prefix /EFI/debian on the partition it was loaded from), else
// $cmdpath/grub.cfg; the image carries both.
const secureBootGrubCfg = `set timeout=0
serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
menuentry "e2e" {
	linux /vmlinuz console=ttyS0,115200 panic=-1
	initrd /initrd.gz
}
`

// secureBootLine is the kernel's report of the firmware's Secure Boot
// state (arch/x86/kernel/setup.c).
var secureBootLine = regexp.MustCompile(`Secure boot (enabled|disabled)`)

// SecureBoot is the Secure Boot variant of the image, built once.
func (im *DeployImages) SecureBoot(t testing.TB) DeployImage {
	t.Helper()
	for _, f := range []string{shimSigned, grubSigned, ovmfSecure, ovmfMSVars} {
		if _, err := os.Stat(f); err != nil {
			unavailable(t, "%s missing (Debian packages shim-signed, grub-efi-amd64-signed, ovmf): %v", f, err)
		}
	}
	im.sbOnce.Do(func() {
		p := filepath.Join(im.dir, "e2e-os-secureboot.raw")
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if im.sbErr = buildSecureBootDisk(ctx, im.dir, p, filepath.Join(im.dir, "initrd.gz")); im.sbErr != nil {
			return
		}
		im.sb, im.sbErr = describeImage(p, "raw")
		if im.sbErr == nil {
			im.sbErr = os.Chmod(p, 0o444)
		}
	})
	if im.sbErr != nil {
		t.Fatalf("secure boot test image: %v", im.sbErr)
	}
	return im.sb
}

// buildSecureBootDisk writes the image with go-diskfs: no loop device, no
// mount, so nothing else on the host can write to it later.
func buildSecureBootDisk(ctx context.Context, dir, out, initrd string) error {
	_ = os.Remove(out)
	d, err := diskfs.Create(out, sbImageSize, diskfs.SectorSize512)
	if err != nil {
		return err
	}
	defer d.Close()
	// One EFI system partition from 1 MiB to the last usable sector (the
	// backup GPT takes the last 33).
	table := &gpt.Table{ProtectiveMBR: true, LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*gpt.Partition{{
		Index: 1, Start: 2048, End: sbImageSize/512 - 34, Type: gpt.EFISystemPartition, Name: "EFI system",
	}}}
	if err := d.Partition(table); err != nil {
		return fmt.Errorf("gpt: %w", err)
	}
	fs, err := d.CreateFilesystem(disk.FilesystemSpec{Partition: 1, FSType: filesystem.TypeFat32, VolumeLabel: "EFI"})
	if err != nil {
		return fmt.Errorf("fat32: %w", err)
	}
	for _, dir := range []string{"/EFI", "/EFI/BOOT", "/EFI/debian"} {
		if err := fs.Mkdir(dir); err != nil {
			return fmt.Errorf("mkdir %s: %w", dir, err)
		}
	}
	cfg := filepath.Join(dir, "grub-secureboot.cfg")
	if err := os.WriteFile(cfg, []byte(secureBootGrubCfg), 0o644); err != nil {
		return err
	}
	for dst, src := range map[string]string{
		"/EFI/BOOT/BOOTX64.EFI": shimSigned, // the removable-media path: no boot entry needed
		"/EFI/BOOT/grubx64.efi": grubSigned, // shim loads it from its own directory
		"/EFI/BOOT/grub.cfg":    cfg,
		"/EFI/debian/grub.cfg":  cfg,
		"/vmlinuz":              imageKernelPath(),
		"/initrd.gz":            initrd,
	} {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := copyIntoFS(fs, dst, src); err != nil {
			return err
		}
	}
	return nil
}

func copyIntoFS(fs filesystem.FileSystem, dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := fs.OpenFile(dst, os.O_CREATE|os.O_RDWR)
	if err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	if _, err := io.Copy(f, in); err != nil {
		return fmt.Errorf("%s: %w", dst, err)
	}
	return f.Close()
}

// TestSecureBootImageBoots boots the Secure Boot image in a bare qemu
// with enforcing firmware and Microsoft's keys (no castiron): the signed
// chain must get to the marker with the kernel reporting Secure Boot on.
// The same image with the plain firmware reports it off. It checks the
// image and the firmware set-up the deploy test relies on.
func TestSecureBootImageBoots(t *testing.T) {
	im := BuildDeployImages(t)
	img := im.SecureBoot(t)
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		unavailable(t, "missing qemu-system-x86_64 (Debian package qemu-system-x86)")
	}
	for _, tc := range []struct {
		name, machine, code, vars, want string
		extra                           []string
	}{
		{"enforced", "q35,smm=on", ovmfSecure, ovmfMSVars, "enabled", []string{"-global", "driver=cfi.pflash01,property=secure,value=on"}},
		{"plain", "q35", ovmfCode, "/usr/share/OVMF/OVMF_VARS_4M.fd", "disabled", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			vars := filepath.Join(dir, "vars.fd")
			if err := copyFileSparse(tc.vars, vars); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), markerTimeout)
			defer cancel()
			args := append([]string{"-machine", tc.machine, "-accel", "tcg", "-m", "1024", "-nodefaults",
				"-display", "none", "-no-reboot", "-serial", "stdio",
				"-drive", "if=pflash,format=raw,unit=0,readonly=on,file=" + tc.code,
				"-drive", "if=pflash,format=raw,unit=1,file=" + vars,
				"-drive", "if=virtio,format=raw,snapshot=on,file=" + img.Path}, tc.extra...)
			out, err := exec.CommandContext(ctx, qemu, args...).CombinedOutput()
			console := string(out)
			if !strings.Contains(console, im.Marker) {
				t.Fatalf("no marker (%v); console:\n%s", err, tailBytes(out, 3000))
			}
			m := secureBootLine.FindStringSubmatch(console)
			if m == nil || m[1] != tc.want {
				t.Fatalf("kernel says %q, want Secure boot %s; console:\n%s", m, tc.want, tailBytes(out, 3000))
			}
		})
	}
}
