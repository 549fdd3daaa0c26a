package iso

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The ISO a node boots, built from the real ramdisk (`make ramdisk`; set
// CASTIRON_RAMDISK_DIR elsewhere): go-diskfs (what castiron does), the
// cache hit of every later boot with the same inputs, and xorriso (the
// usual tool, same staged tree, same two El Torito entries) side by side.
//
//	go test -run '^$' -bench . -benchtime 5x ./ramdisk/iso/

func realSpec(b *testing.B) Spec {
	b.Helper()
	dir := os.Getenv("CASTIRON_RAMDISK_DIR")
	if dir == "" {
		dir = filepath.Join("..", "..", "castiron-data", "ramdisk")
	}
	spec := Spec{Kernel: filepath.Join(dir, "vmlinuz"), Initramfs: filepath.Join(dir, "initramfs")}
	for _, p := range []string{spec.Kernel, spec.Initramfs} {
		if _, err := os.Stat(p); err != nil {
			b.Skipf("no ramdisk (make ramdisk): %v", err)
		}
	}
	l, err := FindLoaders(dir)
	if err != nil {
		b.Skipf("ISO loaders: %v", err)
	}
	spec.Loaders = l
	nd := []byte(`{"links":[{"id":"port0","type":"phy","ethernet_mac_address":"52:54:00:7f:00:01"}],"networks":[{"id":"net0","type":"ipv4","link":"port0","ip_address":"10.0.0.50","netmask":"255.255.255.0"}]}`)
	spec.Args = []string{"console=ttyS0", "ipa-api-url=http://10.0.0.1:6385", "ipa-node-uuid=1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "boot_method=vmedia"}
	spec.Overlay = map[string][]byte{"etc/castiron/network_data.json": nd}
	spec.Files = map[string][]byte{"openstack/latest/network_data.json": nd}
	return spec
}

func BenchmarkBuild(b *testing.B) {
	spec := realSpec(b)
	dir := b.TempDir()
	var size int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		res, err := Build(context.Background(), spec, filepath.Join(dir, fmt.Sprintf("n%d.iso", i)))
		if err != nil {
			b.Fatal(err)
		}
		size = res.Size
		b.StopTimer()
		_ = os.Remove(res.Path)
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}

func BenchmarkEnsureCached(b *testing.B) {
	spec := realSpec(b)
	c := NewCache(b.TempDir())
	ctx := context.Background()
	const node = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	if _, built, err := c.Ensure(ctx, node, spec); err != nil || built == nil {
		b.Fatalf("first Ensure: built %v, %v", built, err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, built, err := c.Ensure(ctx, node, spec); err != nil || built != nil {
			b.Fatalf("Ensure: built %v, %v (want the cached ISO)", built, err)
		}
	}
}

// BenchmarkXorriso stages the same tree once and times only xorriso
// writing the ISO from it.
func BenchmarkXorriso(b *testing.B) {
	xorriso, err := exec.LookPath("xorriso")
	if err != nil {
		b.Skip("xorriso not installed")
	}
	spec := realSpec(b)
	stage := filepath.Join(b.TempDir(), "stage")
	if err := os.Mkdir(stage, 0o755); err != nil {
		b.Fatal(err)
	}
	if err := populate(context.Background(), stage, spec, true); err != nil {
		b.Fatal(err)
	}
	out := filepath.Join(b.TempDir(), "x.iso")
	args := []string{"-as", "mkisofs", "-quiet", "-R", "-V", VolumeID, "-o", out,
		"-b", strings.TrimPrefix(isoLinuxBin, "/"), "-c", strings.TrimPrefix(isoLinuxCat, "/"),
		"-no-emul-boot", "-boot-load-size", "4", "-boot-info-table",
		"-eltorito-alt-boot", "-e", strings.TrimPrefix(isoEFIImage, "/"), "-no-emul-boot", stage}
	var size int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if o, err := exec.Command(xorriso, args...).CombinedOutput(); err != nil {
			b.Fatalf("xorriso: %v\n%s", err, o)
		}
		b.StopTimer()
		if st, err := os.Stat(out); err == nil {
			size = st.Size()
		}
		_ = os.Remove(out)
		b.StartTimer()
	}
	b.ReportMetric(float64(size)/(1<<20), "MiB")
}
