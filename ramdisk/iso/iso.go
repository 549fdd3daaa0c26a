// Package iso builds the bootable ISO a machine boots castiron's ramdisk
// from by virtual media: the ramdisk's kernel and initramfs, a per-node
// overlay initramfs (files the agent reads, e.g. its network configuration)
// and the kernel command line, bootable by BIOS (El Torito, isolinux) and
// UEFI (El Torito EFI image holding Debian's CD GRUB). Built with go-diskfs;
// no external program runs. Cache keeps one ISO per node and rebuilds it
// only when its inputs change.
package iso

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"

	"castiron/ramdisk/initramfs"
	"castiron/ramdisk/iso/isofix"
)

// VolumeID is the ISO's volume label, as Ironic labels its virtual media
// boot ISOs (ironic-python-agent looks for it).
const VolumeID = "VMEDIA_BOOT_ISO"

// Spec is everything an ISO is made of.
type Spec struct {
	Kernel    string   // path of the ramdisk's kernel (vmlinuz)
	Initramfs string   // path of the ramdisk's initramfs
	Args      []string // kernel command line, one argument per element
	// Overlay files are unpacked over the ramdisk's root by the kernel
	// (archive names, e.g. "etc/castiron/network_data.json").
	Overlay map[string][]byte
	// Files are extra files in the ISO's tree (e.g. Ironic's
	// "openstack/latest/network_data.json").
	Files   map[string][]byte
	Loaders Loaders
}

// Result describes a built ISO.
type Result struct {
	Path     string
	Size     int64
	Duration time.Duration
}

// Build writes the ISO to dst atomically (a temporary file in dst's
// directory, renamed). Large inputs are hard-linked into go-diskfs's
// staging directory when they are on the same file system, else copied.
func Build(ctx context.Context, spec Spec, dst string) (Result, error) {
	start := time.Now()
	if err := checkArgs(spec.Args); err != nil {
		return Result{}, err
	}
	stage, err := os.MkdirTemp(filepath.Dir(dst), ".iso-stage-")
	if err != nil {
		return Result{}, fmt.Errorf("iso: %w", err)
	}
	defer os.RemoveAll(stage)
	if err := os.Chmod(stage, 0o755); err != nil { // the ISO's root directory
		return Result{}, fmt.Errorf("iso: %w", err)
	}
	overlay := len(spec.Overlay) > 0
	if err := populate(ctx, stage, spec, overlay); err != nil {
		return Result{}, err
	}
	size, err := initramfs.CreateAtomic(ctx, dst, 0o644, func(f *os.File) error {
		return finalize(f, stage)
	})
	if err != nil {
		return Result{}, fmt.Errorf("iso: %w", err)
	}
	return Result{Path: dst, Size: size, Duration: time.Since(start)}, nil
}

// populate lays the ISO's tree out in stage.
func populate(ctx context.Context, stage string, spec Spec, overlay bool) error {
	links := map[string]string{
		isoKernel:    spec.Kernel,
		isoInitramfs: spec.Initramfs,
		isoLinuxBin:  spec.Loaders.ISOLinux,
		isoLDLinux:   spec.Loaders.LDLinux,
	}
	for _, dst := range sortedKeys(links) {
		if links[dst] == "" {
			return fmt.Errorf("iso: no source file for %s", dst)
		}
		if err := linkOrCopy(ctx, links[dst], filepath.Join(stage, dst)); err != nil {
			return err
		}
	}
	gen := map[string][]byte{
		isoLinuxCfg: []byte(isolinuxCfg(spec.Args, overlay)),
		isoGRUBCfg:  []byte(grubCfg(spec.Args, overlay)),
		isoDiskInfo: []byte("castiron virtual media boot ISO\n"),
	}
	if overlay {
		var b bytes.Buffer
		if err := initramfs.WriteOverlay(ctx, &b, spec.Overlay); err != nil {
			return fmt.Errorf("iso: overlay: %w", err)
		}
		gen[isoOverlay] = b.Bytes()
	}
	for name, data := range spec.Files {
		clean := path.Clean("/" + name)
		if _, taken := gen[clean]; taken || links[clean] != "" || clean == "/" {
			return fmt.Errorf("iso: extra file %q collides with the ISO's own files", name)
		}
		gen[clean] = data
	}
	for _, name := range sortedKeys(gen) {
		if err := writeFile(filepath.Join(stage, name), gen[name]); err != nil {
			return err
		}
	}
	efi, err := efiImage(spec.Loaders.GRUBEFI)
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(stage, isoEFIImage), efi)
}

// finalize writes the staged tree as ISO 9660 (Rock Ridge for GRUB's and
// Linux's long names; the primary names stay valid 8.3 for isolinux) with
// two El Torito entries: BIOS isolinux (no emulation, 4 sectors loaded,
// boot info table patched in) and the EFI FAT image.
func finalize(f *os.File, stage string) error {
	fs, err := iso9660.Create(file.New(f, false), 0, 0, 2048, stage)
	if err != nil {
		return err
	}
	bios := &iso9660.ElToritoEntry{
		Platform:  iso9660.BIOS,
		Emulation: iso9660.NoEmulation,
		BootFile:  isoLinuxBin,
		BootTable: true,
	}
	bios.SetLoadSize(4)
	efi := &iso9660.ElToritoEntry{
		Platform:  iso9660.EFI,
		Emulation: iso9660.NoEmulation,
		BootFile:  isoEFIImage,
	}
	err = fs.Finalize(iso9660.FinalizeOptions{
		RockRidge:           true,
		VolumeIdentifier:    VolumeID,
		PublisherIdentifier: "castiron",
		ElTorito: &iso9660.ElTorito{
			BootCatalog: isoLinuxCat,
			Entries:     []*iso9660.ElToritoEntry{bios, efi},
		},
	})
	if err != nil {
		return err
	}
	return padDescriptors(f)
}

// padDescriptors applies isofix.PadIdentifiers to the volume descriptors
// (sector 16 on; a handful of sectors hold them all).
func padDescriptors(f *os.File) error {
	head := make([]byte, 32*isofix.Sector)
	n, err := f.ReadAt(head, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	head = head[:n]
	isofix.PadIdentifiers(head)
	_, err = f.WriteAt(head, 0)
	return err
}

func writeFile(p string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	if err := os.WriteFile(p, data, 0o644); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	return nil
}

// linkOrCopy hard-links src to dst, or copies it across file systems.
func linkOrCopy(ctx context.Context, src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("iso: %w", err)
	}
	if err = ctx.Err(); err == nil {
		_, err = io.Copy(out, in)
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("iso: copying %s: %w", src, err)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
