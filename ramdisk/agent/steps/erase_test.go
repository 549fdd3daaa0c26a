package steps

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"castiron/ramdisk/protocol"
)

// onPartition runs fn on a loop device over part of dev, as if it were
// the partition's own device.
func onPartition(t *testing.T, dev string, off, size int64, fn func(part string)) {
	t.Helper()
	part := strings.TrimSpace(sh(t, "losetup", "--find", "--show", "--offset", strconv.FormatInt(off, 10), "--sizelimit", strconv.FormatInt(size, 10), dev))
	defer sh(t, "losetup", "-d", part)
	fn(part)
}

func probe(t *testing.T, dev string, off int64) string {
	t.Helper()
	out, _ := exec.Command("blkid", "-p", "-O", strconv.FormatInt(off, 10), "-o", "export", dev).CombinedOutput()
	return strings.TrimSpace(string(out))
}

func randomFill(t *testing.T, dev string, size int64) []byte {
	t.Helper()
	b := make([]byte, size)
	rng := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestEraseDevicesMetadata(t *testing.T) {
	need(t, true, "losetup", "sgdisk", "sfdisk", "mkfs.ext4", "mkswap", "blkid", "wipefs")
	const size = 96 << 20
	// A GPT disk: ext4 in partition 1, swap in partition 2.
	gptDev := loopDevice(t, size, 0)
	randomFill(t, gptDev, size)
	sh(t, "sgdisk", "-n", "1:2048:+72M", "-n", "2:0:0", gptDev)
	onPartition(t, gptDev, 1<<20, 72<<20, func(p string) { sh(t, "mkfs.ext4", "-q", "-F", p) })
	p2 := int64(2048+72*2048) * 512
	onPartition(t, gptDev, p2, size-p2-33*512, func(p string) { sh(t, "mkswap", p) })
	// An MBR disk with a logical partition holding ext4.
	mbrDev := loopDevice(t, size, 0)
	cmd := exec.Command("sfdisk", "--quiet", mbrDev)
	cmd.Stdin = strings.NewReader("label: dos\n2048,20480,83\n,,5\n,40960,83\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sfdisk: %v %s", err, out)
	}
	logical := int64(0)
	for _, l := range strings.Split(sh(t, "sfdisk", "--dump", mbrDev), "\n") {
		if strings.HasPrefix(l, mbrDev+"p5 ") {
			f := strings.Fields(strings.NewReplacer(",", " ", "=", " ").Replace(l))
			logical, _ = strconv.ParseInt(f[3], 10, 64)
		}
	}
	if logical == 0 {
		t.Fatal("no logical partition")
	}
	onPartition(t, mbrDev, logical*512, 40960*512, func(p string) { sh(t, "mkfs.ext4", "-q", "-F", p) })
	// A file holding a file system, standing in for a disk.
	file := filepath.Join(t.TempDir(), "disk.img")
	os.WriteFile(file, make([]byte, 32<<20), 0o644)
	sh(t, "mkfs.ext4", "-q", "-F", file)
	// A read-only disk is left alone.
	roFile := filepath.Join(t.TempDir(), "ro.img")
	os.WriteFile(roFile, make([]byte, 8<<20), 0o644)
	sh(t, "mkfs.ext4", "-q", "-F", roFile)
	roDev := strings.TrimSpace(sh(t, "losetup", "--find", "--show", "--read-only", roFile))
	defer sh(t, "losetup", "-d", roDev)

	for _, c := range []struct {
		dev  string
		off  int64
		want string
	}{{gptDev, 0, "PTTYPE=gpt"}, {gptDev, 1 << 20, "TYPE=ext4"}, {gptDev, p2, "TYPE=swap"}, {mbrDev, 0, "PTTYPE=dos"}, {mbrDev, logical * 512, "TYPE=ext4"}, {file, 0, "TYPE=ext4"}} {
		if got := probe(t, c.dev, c.off); !strings.Contains(got, c.want) {
			t.Fatalf("before: %s at %d: %q, want %s", c.dev, c.off, got, c.want)
		}
	}
	middle := readDev(t, gptDev, 50<<20, 1<<20)

	var p progressLog
	res, err := runStep(t, context.Background(), testRunner(), protocol.StepEraseDevicesMetadata, nil, inventoryOf(gptDev, mbrDev, file, roDev), &p)
	if err != nil {
		t.Fatal(err)
	}
	if got := res["skipped"].([]string); len(got) != 1 || got[0] != roDev {
		t.Fatalf("result %v", res)
	}
	for _, d := range []string{gptDev, mbrDev, file} {
		if out := strings.TrimSpace(sh(t, "wipefs", "-n", d)); out != "" {
			t.Fatalf("wipefs still finds on %s:\n%s", d, out)
		}
		if out, err := exec.Command("blkid", "-p", d).CombinedOutput(); err == nil {
			t.Fatalf("blkid still finds on %s: %s", d, out)
		}
	}
	for _, c := range []struct {
		dev string
		off int64
	}{{gptDev, 1 << 20}, {gptDev, p2}, {mbrDev, logical * 512}} {
		if got := probe(t, c.dev, c.off); got != "" {
			t.Fatalf("after: %s at %d still has %q", c.dev, c.off, got)
		}
	}
	if out := sh(t, "sgdisk", "-p", gptDev); !strings.Contains(out, "Number  Start (sector)") || strings.Contains(out, "\n   1 ") {
		t.Fatalf("sgdisk still sees partitions:\n%s", out)
	}
	if !bytes.Equal(readDev(t, gptDev, 50<<20, 1<<20), middle) {
		t.Fatal("data outside the metadata regions was erased")
	}
	if got := probe(t, roDev, 0); !strings.Contains(got, "TYPE=ext4") {
		t.Fatalf("the read-only disk was erased: %q", got)
	}
	if last := p.last(); last.Unit != "disks" || last.Percent != 100 {
		t.Fatalf("last progress %+v", last)
	}
	t.Logf("result %v", res)
}

func TestEraseDevicesFull(t *testing.T) {
	need(t, true, "losetup")
	const size = 64 << 20
	dev := loopDevice(t, size, 0)
	file := filepath.Join(t.TempDir(), "disk.img")
	os.WriteFile(file, bytes.Repeat([]byte{0xaa}, 16<<20), 0o644)
	randomFill(t, dev, size)
	var p progressLog
	res, err := runStep(t, context.Background(), testRunner(), protocol.StepEraseDevices, map[string]any{
		protocol.ArgEraseFullPass: true, "devices": []any{dev, file},
	}, nil, &p)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(readDev(t, dev, 0, size), make([]byte, size)) || !bytes.Equal(readDev(t, file, 0, 16<<20), make([]byte, 16<<20)) {
		t.Fatal("not every byte is zero")
	}
	if res["bytes_erased"] != int64(size+16<<20) {
		t.Fatalf("result %v", res)
	}
	if last := p.last(); last.Unit != "bytes" || last.Percent != 100 || last.Done != size+16<<20 {
		t.Fatalf("last progress %+v", last)
	}
	p.checkRate(t)

	t.Run("quick", func(t *testing.T) {
		need(t, true, "mkfs.ext4", "blkid")
		sh(t, "mkfs.ext4", "-q", "-F", dev)
		if _, err := runStep(t, context.Background(), testRunner(), protocol.StepEraseDevices, map[string]any{
			protocol.ArgEraseFullPass: false, "devices": []any{dev},
		}, nil, nil); err != nil {
			t.Fatal(err)
		}
		if got := probe(t, dev, 0); got != "" {
			t.Fatalf("still found %q", got)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := runStep(t, ctx, testRunner(), protocol.StepEraseDevices, map[string]any{"devices": []any{dev}}, nil, nil)
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	})
}

func TestStepArguments(t *testing.T) {
	tests := []struct {
		step string
		args map[string]any
		inv  *protocol.Inventory
		want string
	}{
		{"reboot_into_space", nil, nil, "unknown step deploy.reboot_into_space"},
		{protocol.StepEraseDevices, map[string]any{"full": "maybe"}, nil, "argument full must be a Boolean"},
		{protocol.StepEraseDevices, map[string]any{"devices": "sda"}, nil, "argument devices must be a list"},
		{protocol.StepEraseDevicesMetadata, nil, nil, "no inventory"},
		{protocol.StepEraseDevicesMetadata, map[string]any{"devices": []any{"/nonexistent/disk"}}, nil, "/nonexistent/disk"},
		{protocol.StepWriteImage, map[string]any{protocol.ArgImageURL: "http://x/i", protocol.ArgImageChecksum: "zz"}, &protocol.Inventory{}, "not hexadecimal"},
		{protocol.StepWriteImage, map[string]any{protocol.ArgImageURL: "http://x/i", protocol.ArgImageChecksum: strings.Repeat("a", 64), protocol.ArgImageHashAlgo: "sha1"}, &protocol.Inventory{}, "unsupported image_os_hash_algo"},
		{protocol.StepWriteImage, map[string]any{protocol.ArgImageURL: "http://x/i", protocol.ArgImageChecksum: strings.Repeat("a", 32)}, &protocol.Inventory{}, "MD5"},
		{protocol.StepWriteImage, map[string]any{protocol.ArgImageURL: "http://x/i", protocol.ArgRootDevice: "sda"}, &protocol.Inventory{}, "must be an object"},
		{protocol.StepWriteImage, map[string]any{protocol.ArgImageURL: "http://x/i"}, nil, "no inventory"},
		{protocol.StepWriteImage, map[string]any{protocol.ArgImageURL: "http://x/i"}, &protocol.Inventory{Disks: []protocol.Disk{{Name: "/dev/tiny", Size: 1 << 30}}}, "smaller than 4294967296B"},
	}
	for _, tc := range tests {
		_, err := runStep(t, context.Background(), testRunner(), tc.step, tc.args, tc.inv, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %v: got %v, want %q", tc.step, tc.args, err, tc.want)
		}
	}
}
