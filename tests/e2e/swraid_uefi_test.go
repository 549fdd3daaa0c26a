//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"
)

// TestSoftwareRAID1UEFI is TestSoftwareRAID1 on a UEFI machine (OVMF,
// fresh NVRAM at every power on, as the lab runs it): a manual clean with
// raid.create_configuration builds RAID-1 (md metadata 1.0, whole disks)
// over two disks, the deploy writes a GPT image with an EFI system
// partition (the Secure Boot test image: shim, GRUB, kernel and the
// marker initramfs on the ESP) onto /dev/md/root, and OVMF boots it from
// disk, then again with only the second disk attached.
//
// The layout it checks on the host, what OVMF sees on a member: the
// image's protective MBR and primary GPT at the start; the primary's
// AlternateLBA points at the image's last sector, where the image's own
// backup GPT is, far before the end of the member disk (which holds md's
// superblock, not a GPT). EDK2's partition driver reads the backup where
// the primary says it is, not at the disk's last block, finds it valid
// and writes nothing; the test checks the members still hold the image
// byte for byte and identical data areas after each firmware boot, so
// neither OVMF, shim nor GRUB wrote to the ESP of the member they booted
// from. Then the first member's primary GPT is damaged: OVMF finds no
// backup at that disk's end (md's superblock is there), writes nothing
// and boots the second member. Last, a deploy with a config drive: the agent moves the backup GPT
// to the end of /dev/md/root (still before md's superblock) and adds
// config-2 there, and OVMF boots that layout too.
func TestSoftwareRAID1UEFI(t *testing.T) {
	im := deployImagesFor(t)
	img := im.SecureBoot(t)
	r := newDeployRig(t, "swraid1-uefi", LabOptions{Boot: "uefi", MemMB: 1024, CPUs: 1, Disks: []DiskSpec{
		{SizeGiB: 2, Serial: "E2EDISK0"}, {SizeGiB: 2, Serial: "E2EDISK1"},
	}}, img)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	uuid := r.node.UUID
	useAgentRAID(ctx, t, r)
	n := createRAID1Root(ctx, t, r, "swraid_uefi_create")
	if hint, _ := n.Properties["root_device"].(map[string]any); hint["name"] != "/dev/md/root" {
		t.Errorf("properties.root_device after create: %v (want /dev/md/root)", n.Properties["root_device"])
	}
	// The RAID capability joins the node's boot mode, which must stay.
	if caps, _ := n.Properties["capabilities"].(string); !strings.Contains(caps, "boot_mode:uefi") || !strings.Contains(caps, "raid_level:1") {
		t.Errorf("properties.capabilities %q: want boot_mode:uefi and raid_level:1", caps)
	}
	r.waitVMOff(ctx, t, "after the RAID clean", 60*time.Second)
	for i := 0; i < 2; i++ {
		if err := requireMDMember(r.l.DiskPath(i), "any:root", 1); err != nil {
			t.Fatalf("disk %d after create_configuration: %v", i, err)
		}
	}

	r.setImage(ctx, t, img, "")
	r.provide(ctx, t, false) // automated cleaning around RAID: TestSoftwareRAID1
	run := r.deployTimed(ctx, t, "deploy_swraid1_uefi", true)
	r.checkDeployRecord(ctx, t, run)
	logFirmwareBoot(t, r.l, run.Start)
	n, err := r.c.GetNode(ctx, uuid)
	if err != nil {
		t.Fatal(err)
	}
	results, _ := n.DriverInternalInfo["agent_step_results"].(map[string]any)
	if wr, _ := results["deploy.write_image"].(map[string]any); wr["target_disk"] != "/dev/md/root" {
		t.Errorf("write_image wrote %v, want the RAID root /dev/md/root", wr["target_disk"])
	}
	checkUEFIMembers(t, r.l, img, false, "after the deploy and its boot from disk")

	// The first disk pulled out: OVMF boots the second member alone.
	if err := r.l.UseDisks(1); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	for _, args := range [][]string{{"chassis", "bootdev", "disk"}, {"chassis", "power", "on"}} {
		if out, err := r.l.Ipmitool(ctx, args...); err != nil {
			t.Fatalf("ipmitool %v: %v: %s", args, err, out)
		}
	}
	marker := r.waitMarker(ctx, t, start)
	t.Logf("E2E-TIMING swraid_uefi_second_disk_boot marker=%.2fs", marker.Sub(start).Seconds())
	if ev, ok := firstLine(r.l.VMEvents(), start, "start bootdev="); !ok || !strings.HasSuffix(ev.Text, " boot=uefi disks=E2EDISK1") {
		t.Errorf("the VM's start with the first disk pulled: %q, want UEFI with only E2EDISK1 attached", ev.Text)
	}
	logFirmwareBoot(t, r.l, start)
	if err := r.l.UseDisks(); err != nil {
		t.Fatal(err)
	}
	checkUEFIMembers(t, r.l, img, false, "after the second disk booted alone")

	// The first member's primary GPT damaged (a flipped byte, its CRC then
	// wrong), both disks attached: EDK2 looks for a backup at that disk's
	// last block, finds md's area and no GPT, restores nothing and boots
	// the second member.
	sum := corruptPrimaryGPT(t, r.l.DiskPath(0))
	start = time.Now()
	for _, args := range [][]string{{"chassis", "bootdev", "disk"}, {"chassis", "power", "on"}} {
		if out, err := r.l.Ipmitool(ctx, args...); err != nil {
			t.Fatalf("ipmitool %v: %v: %s", args, err, out)
		}
	}
	marker = r.waitMarker(ctx, t, start)
	t.Logf("E2E-TIMING swraid_uefi_damaged_first_member_boot marker=%.2fs", marker.Sub(start).Seconds())
	if ev, ok := firstLine(r.l.VMEvents(), start, "start bootdev="); !ok || !strings.HasSuffix(ev.Text, " disks=E2EDISK0,E2EDISK1") {
		t.Errorf("the VM's start with the damaged member: %q, want both disks attached", ev.Text)
	}
	logFirmwareBoot(t, r.l, start)
	if _, err := readMemberGPT(r.l.DiskPath(0)); err == nil || !strings.Contains(err.Error(), "bad CRC") {
		t.Errorf("the damaged member's GPT after the boot: %v, want its primary still damaged (the firmware restored nothing)", err)
	}
	if got := gptAreasSum(t, r.l.DiskPath(0)); got != sum {
		t.Errorf("the firmware wrote to the damaged member's GPT areas (sha256 %s before the boot, %s after)", sum, got)
	}
	if err := requireMDMember(r.l.DiskPath(0), "any:root", 1); err != nil {
		t.Errorf("the damaged member after the boot: %v", err)
	}

	// Again with a config drive, as metal3 always sends one: the agent
	// moves the image's backup GPT to the end of /dev/md/root (inside md's
	// data area, before the superblock) and adds config-2 there; the
	// members' primary GPT then points at it and OVMF still boots them.
	if err := r.c.SetProvisionState(ctx, uuid, "deleted"); err != nil {
		t.Fatalf("undeploy: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, uuid, "available", cleanTimeout); err != nil {
		t.Fatalf("undeploy: %v", err)
	}
	r.waitVMOff(ctx, t, "after undeploy", 60*time.Second)
	r.setImage(ctx, t, img, "") // undeploy cleared instance_info
	start = time.Now()
	if err := r.c.Do(ctx, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active",
		"configdrive": map[string]any{"meta_data": map[string]any{"hostname": "swraid-uefi"}}}, nil); err != nil {
		t.Fatalf("deploy with a config drive: %v", err)
	}
	if _, err := r.c.WaitProvisionState(ctx, uuid, "active", deployTimeout); err != nil {
		t.Fatalf("deploy with a config drive: %v", err)
	}
	marker = r.waitMarker(ctx, t, start)
	t.Logf("E2E-TIMING deploy_swraid1_uefi_configdrive marker=%.2fs", marker.Sub(start).Seconds())
	logFirmwareBoot(t, r.l, start)
	checkUEFIMembers(t, r.l, img, true, "after the deploy with a config drive")
}

// logFirmwareBoot logs what OVMF said on the console about the boot
// options it started or failed (BdsDxe names the device path: the NIC for
// the agent, a virtio disk for the deployed image).
func logFirmwareBoot(t *testing.T, l *Lab, since time.Time) {
	t.Helper()
	var bds []string
	for _, line := range l.Console() {
		if !line.At.Before(since) && strings.Contains(line.Text, "BdsDxe:") && !strings.Contains(line.Text, "BdsDxe: loading") {
			bds = append(bds, strings.TrimSpace(line.Text))
		}
	}
	t.Logf("OVMF boot manager since %s: %q", since.Format("15:04:05"), bds)
}

// checkUEFIMembers checks both RAID-1 members on the host: each holds an
// md 1.0 superblock of any:root at its end and the image from sector 0
// (byte for byte; with a config drive, the image's ESP at the same
// place); the GPT is what the firmware accepts on a member (primary valid,
// its backup valid where AlternateLBA says: the image's last sector, or
// with a config drive the last sector of /dev/md/root, never the member's,
// which is md's); the members' md data areas are identical (nothing wrote
// to one member's ESP behind md's back).
func checkUEFIMembers(t *testing.T, l *Lab, img DeployImage, configDrive bool, when string) {
	t.Helper()
	for i := 0; i < 2; i++ {
		disk := l.DiskPath(i)
		md, err := requireMDMemberSize(disk, "any:root", 1)
		if err != nil {
			t.Errorf("%s: disk %d: %v", when, i, err)
			continue
		}
		g, err := readMemberGPT(disk)
		if err != nil {
			t.Errorf("%s: disk %d: %v", when, i, err)
			continue
		}
		want := uint64(img.Size/512 - 1)
		if configDrive {
			want = uint64(md/512 - 1)
			if err := sameBytes(disk, img.Path, int64(g.espStart)*512, int64(g.espEnd+1)*512); err != nil {
				t.Errorf("%s: disk %d: the ESP: %v", when, i, err)
			}
			if !slices.Contains(g.names, "config-2") {
				t.Errorf("%s: disk %d: GPT partitions %q, want config-2 among them", when, i, g.names)
			}
		} else if err := DiskStartsWith(disk, img.Path); err != nil {
			t.Errorf("%s: disk %d does not hold the image: %v", when, i, err)
		}
		if g.alternateLBA != want || g.alternateLBA >= g.diskLastLBA {
			t.Errorf("%s: disk %d: primary GPT AlternateLBA %d, want %d (the member's last LBA is %d)",
				when, i, g.alternateLBA, want, g.diskLastLBA)
		}
		if i == 0 {
			t.Logf("%s: member GPT: primary at LBA 1 valid, AlternateLBA %d with a valid backup there "+
				"(the image ends at LBA %d, /dev/md/root at %d, the member at %d); partitions %q, ESP %d-%d",
				when, g.alternateLBA, img.Size/512-1, md/512-1, g.diskLastLBA, g.names, g.espStart, g.espEnd)
		}
	}
	if err := sameMDData(l.DiskPath(0), l.DiskPath(1)); err != nil {
		t.Errorf("%s: %v", when, err)
	}
}

// requireMDMemberSize is requireMDMember that also returns the bytes of
// the member md uses for data (the array's size for RAID-1; md 1.0:
// from sector 0, the component size the superblock keeps at byte 80).
func requireMDMemberSize(path, name string, level int32) (int64, error) {
	if err := requireMDMember(path, name, level); err != nil {
		return 0, err
	}
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	sb := make([]byte, 256)
	if _, err := f.ReadAt(sb, ((st.Size()/512-16)&^7)*512); err != nil {
		return 0, err
	}
	size := int64(binary.LittleEndian.Uint64(sb[80:])) * 512
	if size <= 0 || size > st.Size() {
		return 0, fmt.Errorf("%s: md superblock component size %d", path, size)
	}
	return size, nil
}

// memberGPT is what the firmware reads from a member disk.
type memberGPT struct {
	alternateLBA, diskLastLBA uint64
	espStart, espEnd          uint64
	names                     []string // of the partitions in use
}

// readMemberGPT checks a member's GPT the way EDK2's partition driver does
// (PartitionInstallGptChildHandles, PartitionValidGptTable): a protective
// MBR entry (type 0xEE from LBA 1), a primary header at LBA 1 with its
// signature, header CRC, MyLBA and partition array CRC, then the backup
// header at the primary's AlternateLBA with the same checks and MyLBA equal
// to that LBA. Hand-written (the UEFI specification's fields, a few lines)
// because go-diskfs's gpt.Read validates the primary only (its fallback
// looks at the disk's last sector), not the backup where AlternateLBA
// points, which is the firmware's check that matters on a member.
func readMemberGPT(path string) (memberGPT, error) {
	f, err := os.Open(path)
	if err != nil {
		return memberGPT{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return memberGPT{}, err
	}
	g := memberGPT{diskLastLBA: uint64(st.Size()/512 - 1)}
	mbr := make([]byte, 512)
	if _, err := f.ReadAt(mbr, 0); err != nil {
		return g, err
	}
	protective := false
	for i := 0; i < 4; i++ {
		e := mbr[446+16*i:]
		if e[4] == 0xee && binary.LittleEndian.Uint32(e[8:]) == 1 {
			protective = true
		}
	}
	if !protective || mbr[510] != 0x55 || mbr[511] != 0xaa {
		return g, fmt.Errorf("%s: no protective MBR", path)
	}
	header := func(lba uint64) ([]byte, []byte, error) {
		h := make([]byte, 512)
		if _, err := f.ReadAt(h, int64(lba)*512); err != nil {
			return nil, nil, err
		}
		if string(h[:8]) != "EFI PART" {
			return nil, nil, fmt.Errorf("no GPT header at LBA %d", lba)
		}
		size := binary.LittleEndian.Uint32(h[12:])
		if size < 92 || size > 512 {
			return nil, nil, fmt.Errorf("GPT header at LBA %d: size %d", lba, size)
		}
		sum := binary.LittleEndian.Uint32(h[16:])
		c := bytes.Clone(h[:size])
		clear(c[16:20])
		if crc32.ChecksumIEEE(c) != sum {
			return nil, nil, fmt.Errorf("GPT header at LBA %d: bad CRC", lba)
		}
		if my := binary.LittleEndian.Uint64(h[24:]); my != lba {
			return nil, nil, fmt.Errorf("GPT header at LBA %d says MyLBA %d", lba, my)
		}
		entriesLBA := binary.LittleEndian.Uint64(h[72:])
		count, esize := binary.LittleEndian.Uint32(h[80:]), binary.LittleEndian.Uint32(h[84:])
		if esize < 128 || count == 0 || count*esize > 1<<20 {
			return nil, nil, fmt.Errorf("GPT header at LBA %d: %d entries of %d bytes", lba, count, esize)
		}
		entries := make([]byte, count*esize)
		if _, err := f.ReadAt(entries, int64(entriesLBA)*512); err != nil && err != io.EOF {
			return nil, nil, err
		}
		if crc32.ChecksumIEEE(entries) != binary.LittleEndian.Uint32(h[88:]) {
			return nil, nil, fmt.Errorf("GPT header at LBA %d: bad partition array CRC", lba)
		}
		return h, entries, nil
	}
	primary, entries, err := header(1)
	if err != nil {
		return g, fmt.Errorf("%s: primary: %w", path, err)
	}
	g.alternateLBA = binary.LittleEndian.Uint64(primary[32:])
	if _, _, err := header(g.alternateLBA); err != nil {
		return g, fmt.Errorf("%s: backup at the primary's AlternateLBA: %w", path, err)
	}
	// The EFI system partition: type C12A7328-F81F-11D2-BA4B-00A0C93EC93B
	// (mixed-endian on disk).
	esp := []byte{0x28, 0x73, 0x2a, 0xc1, 0x1f, 0xf8, 0xd2, 0x11, 0xba, 0x4b, 0x00, 0xa0, 0xc9, 0x3e, 0xc9, 0x3b}
	esize := binary.LittleEndian.Uint32(primary[84:])
	for off := 0; off+int(esize) <= len(entries); off += int(esize) {
		e := entries[off : off+int(esize)]
		if bytes.Equal(e[:16], make([]byte, 16)) {
			continue
		}
		var name []uint16 // UTF-16LE, 36 units at byte 56
		for j := 56; j+1 < 128; j += 2 {
			if u := binary.LittleEndian.Uint16(e[j:]); u != 0 {
				name = append(name, u)
			} else {
				break
			}
		}
		g.names = append(g.names, string(utf16.Decode(name)))
		if bytes.Equal(e[:16], esp) && g.espStart == 0 {
			g.espStart = binary.LittleEndian.Uint64(e[32:])
			g.espEnd = binary.LittleEndian.Uint64(e[40:])
		}
	}
	if g.espStart == 0 {
		return g, fmt.Errorf("%s: no EFI system partition in the GPT", path)
	}
	return g, nil
}

// sameMDData compares two RAID-1 members over md's data area.
func sameMDData(a, b string) error {
	size, err := requireMDMemberSize(a, "any:root", 1)
	if err != nil {
		return err
	}
	if err := sameBytes(a, b, 0, size); err != nil {
		return fmt.Errorf("the RAID-1 members differ in md's data area (%d bytes): %w", size, err)
	}
	return nil
}

// sameBytes compares the files a and b over [from, to).
func sameBytes(a, b string, from, to int64) error {
	fa, err := os.Open(a)
	if err != nil {
		return err
	}
	defer fa.Close()
	fb, err := os.Open(b)
	if err != nil {
		return err
	}
	defer fb.Close()
	ba, bb := make([]byte, 4<<20), make([]byte, 4<<20)
	for off := from; off < to; off += int64(len(ba)) {
		n := min(int64(len(ba)), to-off)
		if _, err := fa.ReadAt(ba[:n], off); err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		if _, err := fb.ReadAt(bb[:n], off); err != nil {
			return fmt.Errorf("%s: %w", b, err)
		}
		if !bytes.Equal(ba[:n], bb[:n]) {
			i := 0
			for ba[i] == bb[i] {
				i++
			}
			return fmt.Errorf("%s and %s differ at byte %d", a, b, off+int64(i))
		}
	}
	return nil
}

// corruptPrimaryGPT flips a byte of the disk GUID in the primary GPT
// header at LBA 1 (the header's CRC no longer matches) and returns
// gptAreasSum after that.
func corruptPrimaryGPT(t *testing.T, path string) string {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := f.ReadAt(b, 512+56); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0xff
	if _, err := f.WriteAt(b, 512+56); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := readMemberGPT(path); err == nil || !strings.Contains(err.Error(), "bad CRC") {
		t.Fatalf("%s after the flipped byte: %v, want a bad CRC", path, err)
	}
	return gptAreasSum(t, path)
}

// gptAreasSum hashes what a GPT repair could write on a member: its first
// 64 MiB (the image: protective MBR, primary GPT, ESP, the image's backup
// GPT) and its last MiB (where a backup at the disk's end would go, and
// md's superblock).
func gptAreasSum(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, 64<<20)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(h, io.NewSectionReader(f, st.Size()-1<<20, 1<<20)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
