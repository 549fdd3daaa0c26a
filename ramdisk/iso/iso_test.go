package iso

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat12"
)

// unavailable skips, or fails when CI=true (CI installs every tool).
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

func hostLoaders(t testing.TB) Loaders {
	t.Helper()
	l, err := FindLoaders("")
	if err != nil {
		unavailable(t, "%v", err)
	}
	return l
}

// testSpec is a spec with small fake kernel and initramfs files.
func testSpec(t testing.TB) Spec {
	t.Helper()
	dir := t.TempDir()
	kernel := filepath.Join(dir, "vmlinuz")
	initrd := filepath.Join(dir, "initramfs")
	if err := os.WriteFile(kernel, bytes.Repeat([]byte("K"), 100_000), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(initrd, bytes.Repeat([]byte("I"), 300_000), 0o644); err != nil {
		t.Fatal(err)
	}
	return Spec{
		Kernel: kernel, Initramfs: initrd,
		Args:    []string{"console=ttyS0", "ipa-api-url=http://10.0.0.1:6385", "ipa-node-uuid=1be26c0b-03f2-4d2e-ae87-c02d7f33c123"},
		Overlay: map[string][]byte{"etc/castiron/network_data.json": []byte(`{"links":[]}`)},
		Files:   map[string][]byte{"openstack/latest/network_data.json": []byte(`{"links":[]}`)},
		Loaders: hostLoaders(t),
	}
}

// extractISO unpacks the ISO with xorriso, a reader we did not write
// (go-diskfs v1.9.4's own reader cannot read its Rock Ridge output back).
func extractISO(t *testing.T, iso string) string {
	t.Helper()
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		unavailable(t, "xorriso not installed (apt-get install xorriso)")
	}
	dir := filepath.Join(t.TempDir(), "tree")
	if out, err := exec.Command(xorriso, "-osirrox", "on", "-indev", iso, "-extract", "/", dir).CombinedOutput(); err != nil {
		t.Fatalf("xorriso -extract: %v\n%s", err, out)
	}
	return dir
}

func readTree(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatalf("reading %s from the ISO: %v", name, err)
	}
	return b
}

func TestBuildLayout(t *testing.T) {
	spec := testSpec(t)
	dst := filepath.Join(t.TempDir(), "node.iso")
	res, err := Build(context.Background(), spec, dst)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ISO %d bytes in %v", res.Size, res.Duration)
	tree := extractISO(t, dst)
	if k := readTree(t, tree, isoKernel); len(k) != 100_000 || k[0] != 'K' {
		t.Errorf("kernel: %d bytes", len(k))
	}
	if i := readTree(t, tree, isoInitramfs); len(i) != 300_000 {
		t.Errorf("initramfs: %d bytes", len(i))
	}
	cfg := string(readTree(t, tree, isoLinuxCfg))
	if !strings.Contains(cfg, "APPEND initrd=/boot/initrd.img,/boot/node.img console=ttyS0 ipa-api-url=http://10.0.0.1:6385 ipa-node-uuid=1be26c0b") {
		t.Errorf("isolinux.cfg:\n%s", cfg)
	}
	grub := string(readTree(t, tree, isoGRUBCfg))
	if !strings.Contains(grub, "linux /boot/vmlinuz 'console=ttyS0' 'ipa-api-url=http://10.0.0.1:6385'") ||
		!strings.Contains(grub, "initrd /boot/initrd.img /boot/node.img") {
		t.Errorf("grub.cfg:\n%s", grub)
	}
	if nd := readTree(t, tree, "/openstack/latest/network_data.json"); string(nd) != `{"links":[]}` {
		t.Errorf("network_data.json: %q", nd)
	}
	if ov := readTree(t, tree, isoOverlay); !bytes.Contains(ov, []byte("etc/castiron/network_data.json")) {
		t.Errorf("overlay lacks the network data")
	}
	readTree(t, tree, isoDiskInfo)

	// El Torito: boot record volume descriptor at sector 17 pointing to a
	// catalog with a BIOS entry and an EFI section.
	raw, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if label := string(raw[16*2048+40 : 16*2048+72]); label != fmt.Sprintf("%-32s", VolumeID) {
		t.Errorf("volume label %q, want %q padded with blanks", label, VolumeID)
	}
	brvd := raw[17*2048 : 18*2048]
	if brvd[0] != 0 || string(brvd[1:6]) != "CD001" || !bytes.HasPrefix(brvd[7:], []byte("EL TORITO SPECIFICATION")) {
		t.Fatalf("no El Torito boot record at sector 17: % x", brvd[:40])
	}
	cat := raw[int(binary.LittleEndian.Uint32(brvd[0x47:]))*2048:]
	if cat[0] != 1 || cat[1] != 0 || cat[0x1e] != 0x55 || cat[0x1f] != 0xaa {
		t.Fatalf("validation entry: % x", cat[:32])
	}
	if cat[32] != 0x88 || cat[33] != 0 || binary.LittleEndian.Uint16(cat[32+6:]) != 4 {
		t.Errorf("BIOS entry: % x (want bootable, no emulation, 4 sectors)", cat[32:64])
	}
	if cat[64] != 0x91 || cat[65] != 0xef {
		t.Errorf("EFI section header: % x (want last header, platform EFI)", cat[64:96])
	}
	efi := cat[96:128]
	if efi[0] != 0x88 {
		t.Fatalf("EFI entry not bootable: % x", efi)
	}
	efiAt := int64(binary.LittleEndian.Uint32(efi[8:])) * 2048
	imgBytes := readTree(t, tree, isoEFIImage)
	if !bytes.Equal(raw[efiAt:efiAt+int64(len(imgBytes))], imgBytes) {
		t.Error("the EFI entry does not point at efiboot.img")
	}
	// isolinux needs its boot info table: the primary volume descriptor's
	// sector at offset 8 of the loaded image.
	biosAt := int64(binary.LittleEndian.Uint32(cat[32+8:])) * 2048
	if pvd := binary.LittleEndian.Uint32(raw[biosAt+8:]); pvd != 16 {
		t.Errorf("isolinux boot info table: PVD at %d, want 16", pvd)
	}

	// The EFI image is a FAT file system holding GRUB as the removable
	// medium's boot loader.
	img := filepath.Join(t.TempDir(), "efi.img")
	if err := os.WriteFile(img, imgBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer fi.Close()
	fat, err := fat12.Read(file.New(fi, true), int64(len(imgBytes)), 0, 512)
	if err != nil {
		t.Fatalf("efiboot.img is not FAT12: %v", err)
	}
	got, err := fat.ReadFile(efiBootPath)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(spec.Loaders.GRUBEFI)
	if !bytes.Equal(got, want) {
		t.Errorf("%s in the EFI image differs from %s", efiBootPath, spec.Loaders.GRUBEFI)
	}

	// xorriso's view of the boot catalog.
	out, err := exec.Command("xorriso", "-indev", dst, "-report_el_torito", "plain").CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	report := string(out)
	if !strings.Contains(report, "El Torito boot img :   1  BIOS  y   none") || !strings.Contains(report, "El Torito boot img :   2  UEFI  y   none") {
		t.Errorf("xorriso report:\n%s", report)
	}
	if st, err := os.Stat(tree); err != nil || st.Mode().Perm() != 0o755 {
		t.Errorf("root directory mode %v, want 0755 (err %v)", st.Mode().Perm(), err)
	}
}

func TestBuildRefusesBadArgs(t *testing.T) {
	spec := testSpec(t)
	for _, bad := range []string{"a b", "x=$y", `q="1"`, "", "a;b"} {
		spec.Args = []string{"console=ttyS0", bad}
		if _, err := Build(context.Background(), spec, filepath.Join(t.TempDir(), "x.iso")); err == nil {
			t.Errorf("argument %q accepted", bad)
		}
	}
	spec = testSpec(t)
	spec.Files = map[string][]byte{"boot/vmlinuz": []byte("x")}
	if _, err := Build(context.Background(), spec, filepath.Join(t.TempDir(), "x.iso")); err == nil {
		t.Error("an extra file replacing the kernel was accepted")
	}
}

func TestCache(t *testing.T) {
	spec := testSpec(t)
	c := NewCache(filepath.Join(t.TempDir(), "vmedia"))
	ctx := context.Background()
	const node = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	first, built, err := c.Ensure(ctx, node, spec)
	if err != nil || built == nil {
		t.Fatalf("first Ensure: %q built=%v err=%v", first, built, err)
	}
	again, built, err := c.Ensure(ctx, node, spec)
	if err != nil || built != nil || again != first {
		t.Fatalf("second Ensure with the same inputs: %q built=%v err=%v (want %q from the cache)", again, built, err, first)
	}
	// Another node of the same prefix keeps its ISO.
	other, _, err := c.Ensure(ctx, node+"-x", spec)
	if err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(s *Spec){
		func(s *Spec) {
			s.Args = append(s.Args, "ipa-inspection-callback-url=http://10.0.0.1:6385/v1/continue_inspection")
		},
		func(s *Spec) {
			s.Overlay = map[string][]byte{"etc/castiron/network_data.json": []byte(`{"links":[{}]}`)}
		},
		func(s *Spec) {
			// a rebuilt ramdisk: same path, new contents and mtime
			if err := os.WriteFile(s.Initramfs, []byte("new initramfs"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	} {
		change(&spec)
		next, built, err := c.Ensure(ctx, node, spec)
		if err != nil || built == nil || next == first {
			t.Fatalf("Ensure after a change: %q built=%v err=%v", next, built, err)
		}
		if _, err := os.Stat(filepath.Join(c.Dir(), first)); !os.IsNotExist(err) {
			t.Errorf("the previous ISO %s is still there: %v", first, err)
		}
		first = next
	}
	if _, err := os.Stat(filepath.Join(c.Dir(), other)); err != nil {
		t.Errorf("the other node's ISO is gone: %v", err)
	}
	if err := c.Remove(node); err != nil {
		t.Fatal(err)
	}
	left, _ := filepath.Glob(filepath.Join(c.Dir(), "*.iso"))
	if len(left) != 1 || filepath.Base(left[0]) != other {
		t.Errorf("after Remove: %v, want only %s", left, other)
	}
	if _, _, err := c.Ensure(ctx, "../etc", spec); err == nil {
		t.Error("a name with a path was accepted")
	}
}
