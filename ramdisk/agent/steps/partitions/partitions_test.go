package partitions

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"castiron/ramdisk/agent/steps/blockdev"
)

func need(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required in CI", tool)
			}
			t.Skipf("%s not installed", tool)
		}
	}
}

func sh(t *testing.T, stdin string, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

func disk(t *testing.T, size int64) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return p
}

func read(t *testing.T, p string) Table {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	return Read(f, st.Size(), 512)
}

func TestRead(t *testing.T) {
	need(t, "sgdisk", "sfdisk")
	gpt := disk(t, 64<<20)
	sh(t, "", "sgdisk", "-n", "1:2048:+8M", "-c", "1:boot", "-n", "3:0:+16M", gpt)
	mbr := disk(t, 64<<20)
	sh(t, "label: dos\n2048,8192,83\n,,5\n,4096,82\n,4096,83\n", "sfdisk", "--quiet", mbr)
	backupOnly := disk(t, 64<<20)
	sh(t, "", "sgdisk", "-n", "2:4096:+4M", backupOnly)
	f, _ := os.OpenFile(backupOnly, os.O_WRONLY, 0)
	f.WriteAt(make([]byte, 34*512), 0) // protective MBR and primary GPT gone
	f.Close()

	tests := []struct {
		name string
		path string
		kind string
		want []Partition
	}{
		{"gpt", gpt, "gpt", []Partition{{Number: 1, Start: 1 << 20, Size: 8 << 20, Name: "boot"}, {Number: 3, Start: 9 << 20, Size: 16 << 20}}},
		{"mbr with logical partitions", mbr, "mbr", []Partition{{Number: 1, Start: 1 << 20, Size: 4 << 20}, {Number: 2, Start: 5 << 20}, {Number: 5, Size: 2 << 20}, {Number: 6, Size: 2 << 20}}},
		{"gpt from its backup", backupOnly, "gpt", []Partition{{Number: 2, Start: 2 << 20, Size: 4 << 20}}},
		{"nothing", disk(t, 1<<20), "", nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := read(t, tc.path)
			if got.Kind != tc.kind || len(got.Partitions) != len(tc.want) {
				t.Fatalf("got %+v", got)
			}
			for i, w := range tc.want {
				g := got.Partitions[i]
				if g.Number != w.Number || (w.Start != 0 && g.Start != w.Start) || (w.Size != 0 && g.Size != w.Size) || g.Name != w.Name {
					t.Fatalf("partition %d: got %+v, want %+v", i, g, w)
				}
			}
		})
	}
}

func TestConfigDrivePartition(t *testing.T) {
	need(t, "sgdisk", "sfdisk")
	open := func(t *testing.T, p string) *blockdev.Device {
		d, err := blockdev.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	t.Run("gpt of a smaller image", func(t *testing.T) {
		// The image's GPT ends at 16 MiB; the disk is 256 MiB.
		p := disk(t, 16<<20)
		sh(t, "", "sgdisk", "-n", "1:2048:+8M", p)
		os.Truncate(p, 256<<20)
		part, created, err := ConfigDrive(open(t, p), 70000)
		if err != nil || !created {
			t.Fatal(created, err)
		}
		if out := sh(t, "", "sgdisk", "-v", p); !strings.Contains(out, "No problems found") {
			t.Fatalf("sgdisk -v:\n%s", out)
		}
		if part.Number != 2 || part.Start%(1<<20) != 0 || part.Start+part.Size != 256<<20-33*512 {
			t.Fatalf("partition %+v", part)
		}
		if again, created, err := ConfigDrive(open(t, p), 70000); err != nil || created || again.Number != 2 {
			t.Fatalf("second call: %+v %v %v", again, created, err)
		}
	})
	t.Run("little room left", func(t *testing.T) {
		p := disk(t, 64<<20)
		sh(t, "", "sgdisk", "-n", "1:2048:+60M", p)
		part, _, err := ConfigDrive(open(t, p), 1<<20+1)
		if err != nil {
			t.Fatal(err)
		}
		if part.Size < 1<<20+1 || part.Size > 3<<20 {
			t.Fatalf("partition %+v", part)
		}
	})
	t.Run("no room", func(t *testing.T) {
		p := disk(t, 64<<20)
		sh(t, "", "sgdisk", "-n", "1:2048:0", p)
		if _, _, err := ConfigDrive(open(t, p), 4096); err == nil || !strings.Contains(err.Error(), "no room") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("mbr full", func(t *testing.T) {
		p := disk(t, 128<<20)
		sh(t, "label: dos\n2048,4096\n,4096\n,4096\n,4096\n", "sfdisk", "--quiet", p)
		if _, _, err := ConfigDrive(open(t, p), 4096); err == nil || !strings.Contains(err.Error(), "already has 4 primary partitions") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no table", func(t *testing.T) {
		if _, _, err := ConfigDrive(open(t, disk(t, 64<<20)), 4096); !errors.Is(err, ErrNoPartitionTable) {
			t.Fatalf("got %v", err)
		}
	})
}
