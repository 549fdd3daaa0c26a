package initramfs

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// bootTimeout is generous: a TCG boot takes ~10 s on an idle machine, but a
// CI run at load 19 saw a guest reach only 11 s of its uptime in 2 minutes.
const bootTimeout = 6 * time.Minute

// unavailable skips, or fails when CI=true (CI must have every tool).
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// hostKernel returns the host's newest kernel with modules (Debian's
// linux-image-amd64), or skips.
func hostKernel(t testing.TB) kernel {
	t.Helper()
	k, err := findKernel(context.Background(), defaultModulesRoot, defaultBootDir, "")
	if err != nil {
		unavailable(t, "no host kernel: %v", err)
	}
	return k
}

// vmKernel returns castiron's small VM kernel as ramdisk/kernel/build.sh
// cached it: the directory named by CASTIRON_VM_KERNEL_DIR, else the one
// <repo>/build/vmkernel/selected names (make ramdisk RAMDISK_KERNEL=vm, or
// make test, write it); skips when there is none.
func vmKernel(t testing.TB) kernel {
	t.Helper()
	dir := os.Getenv("CASTIRON_VM_KERNEL_DIR")
	if dir == "" {
		b, err := os.ReadFile("../../build/vmkernel/selected")
		if err != nil {
			unavailable(t, "no VM kernel (make ramdisk-kernel-vm, or set CASTIRON_VM_KERNEL_DIR): %v", err)
		}
		dir = strings.TrimSpace(string(b))
	}
	kver, err := os.ReadFile(filepath.Join(dir, "kver"))
	if err != nil {
		unavailable(t, "no VM kernel in %s: %v", dir, err)
	}
	k := kernelFor(filepath.Join(dir, "lib/modules"), filepath.Join(dir, "boot"), strings.TrimSpace(string(kver)))
	if err := k.check(); err != nil {
		t.Fatalf("VM kernel in %s: %v", dir, err)
	}
	return k
}

// TestBootQEMU builds an initramfs for the host kernel with the default
// modules and a test /init, per compression, appends an overlay archive as
// a boot loader does (castiron's CA, a virtual media ISO's network_data),
// boots it in qemu with a virtio NIC (on a hub with no host side: no
// traffic leaves the VM) and a virtio disk, and checks that init ran with
// a console, saw eth0 and vda and the overlay's file, and powered the VM off.
// Subtest vm does the same with castiron's small VM kernel (make ramdisk
// RAMDISK_KERNEL=vm), whose drivers are built in: no module in the archive.
func TestBootQEMU(t *testing.T) {
	qemu, err := exec.LookPath("qemu-system-x86_64")
	if err != nil {
		unavailable(t, "qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
	}
	k := hostKernel(t)
	agent := testInit(t)

	// none is left out: an uncompressed archive is what the overlay is.
	for _, c := range []Compression{LZ4, Gzip, Zstd} {
		t.Run(string(c), func(t *testing.T) {
			if testing.Short() && c != DefaultCompression {
				t.Skipf("-short: one boot (%s) is enough", DefaultCompression)
			}
			if err := k.checkCompression(c); err != nil {
				t.Skipf("kernel %s: %v", k.version, err)
			}
			bootAndCheck(t, qemu, Options{AgentPath: agent, KernelVersion: k.version, Compression: c, OutDir: t.TempDir()})
		})
	}
	t.Run("vm", func(t *testing.T) {
		vm := vmKernel(t)
		res := bootAndCheck(t, qemu, Options{AgentPath: agent, KernelVersion: vm.version,
			ModulesRoot: filepath.Dir(vm.modulesDir), BootDir: filepath.Dir(vm.imagePath), OutDir: t.TempDir()})
		if len(res.Modules) != 0 || len(res.Missing) != 0 {
			t.Errorf("vm kernel %s: modules in the archive %q, default modules not built in %q; want none of either",
				vm.version, res.Modules, res.Missing)
		}
	})
}

// bootAndCheck builds opts, boots the result with an overlay appended and
// checks what the test init saw.
func bootAndCheck(t *testing.T, qemu string, opts Options) Result {
	t.Helper()
	start := time.Now()
	res, err := Build(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("built %s initramfs for %s: %d bytes, %d modules, in %v", res.Compression, res.KernelVersion, res.Size, len(res.Modules), time.Since(start).Round(time.Millisecond))

	initrd := withOverlay(t, res.InitramfsPath, map[string][]byte{"etc/overlay": []byte("yes\n")})
	out, markerAfter, err := bootVM(t, qemu, res.KernelPath, initrd)
	if err != nil {
		t.Fatalf("qemu: %v\n%s", err, tail(out, 40))
	}
	marker := markerLine(out)
	if marker == "" {
		t.Fatalf("no TESTINIT-OK line on the console\n%s", tail(out, 40))
	}
	t.Logf("qemu start to marker %v (guest uptime %ss): %s", markerAfter.Round(time.Millisecond), markerFields(marker)["uptime"], marker)
	fields := markerFields(marker)
	if fields["console"] != "c5:1" {
		t.Errorf("/dev/console in the archive: %q, want c5:1", fields["console"])
	}
	if !slices.Contains(strings.Split(fields["ifaces"], ","), "eth0") {
		t.Errorf("interfaces %q lack eth0 (virtio_net not loaded?)", fields["ifaces"])
	}
	if !slices.Contains(strings.Split(fields["disks"], ","), "vda") {
		t.Errorf("disks %q lack vda (virtio_blk not loaded?)", fields["disks"])
	}
	if fields["overlay"] != "yes" {
		t.Errorf("the overlay appended to the %s archive was not unpacked (overlay=%q)", res.Compression, fields["overlay"])
	}
	if fields["failed"] != "" {
		t.Errorf("modules failed to load: %s", fields["failed"])
	}
	return res
}

// withOverlay writes the initramfs followed by an overlay archive of files,
// each padded to 4 bytes as iPXE and GRUB place initrds one after another.
func withOverlay(t *testing.T, initramfs string, files map[string][]byte) string {
	t.Helper()
	b, err := os.ReadFile(initramfs)
	if err != nil {
		t.Fatal(err)
	}
	buf := bytes.NewBuffer(b)
	buf.Write(make([]byte, (4-len(b)%4)%4))
	if err := WriteOverlay(context.Background(), buf, files); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "initrd")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// bootVM runs qemu until it exits by itself (init powers off) and returns
// its console output and when the marker line appeared.
func bootVM(t *testing.T, qemu, kernelPath, initrdPath string) (console []byte, markerAfter time.Duration, err error) {
	disk := filepath.Join(t.TempDir(), "disk.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		return nil, 0, err
	}
	if err := os.Truncate(disk, 64<<20); err != nil {
		return nil, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), bootTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, qemu,
		"-nodefaults", "-accel", "tcg", "-m", "512", "-display", "none", "-no-reboot",
		"-serial", "stdio",
		"-kernel", kernelPath, "-initrd", initrdPath,
		"-append", "console=ttyS0 panic=-1",
		// A NIC on a hub with no host side: nothing leaves the VM.
		"-netdev", "hubport,id=n0,hubid=0", "-device", "virtio-net-pci,netdev=n0",
		"-drive", "file="+disk+",if=virtio,format=raw",
	)
	cmd.WaitDelay = 5 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	// Read until qemu exits (or the timeout kills it) and closes stdout.
	var out bytes.Buffer
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		line := sc.Text()
		if markerAfter == 0 && strings.Contains(line, "TESTINIT-OK") {
			markerAfter = time.Since(start)
		}
		out.WriteString(line + "\n")
	}
	err = cmd.Wait()
	t.Logf("qemu ran %v", time.Since(start).Round(time.Millisecond))
	if ctx.Err() != nil {
		err = fmt.Errorf("did not power off within %v: %w", bootTimeout, ctx.Err())
	} else if err != nil {
		err = fmt.Errorf("%w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), markerAfter, err
}

func markerLine(out []byte) string {
	for _, line := range strings.Split(string(out), "\n") {
		if i := strings.Index(line, "TESTINIT-OK"); i >= 0 {
			return strings.TrimSpace(line[i:])
		}
	}
	return ""
}

// markerFields parses "TESTINIT-OK a=1 b=x,y".
func markerFields(line string) map[string]string {
	m := map[string]string{}
	for _, f := range strings.Fields(line)[1:] {
		if k, v, ok := strings.Cut(f, "="); ok {
			m[k] = v
		}
	}
	return m
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// BenchmarkBuildHostKernel measures a full build (default modules, the test
// init as agent) per compression; size is the compressed initramfs.
func BenchmarkBuildHostKernel(b *testing.B) {
	k := hostKernel(b)
	agent := testInit(b)
	if p := os.Getenv("INITRAMFS_BENCH_AGENT"); p != "" {
		agent = p // e.g. the real agent: build/castiron-agent
	}
	for _, c := range []Compression{LZ4, Gzip, Zstd, None} {
		b.Run(string(c), func(b *testing.B) {
			out := b.TempDir()
			var size int64
			for b.Loop() {
				res, err := Build(context.Background(), Options{AgentPath: agent, KernelVersion: k.version, Compression: c, OutDir: out})
				if err != nil {
					if errors.Is(err, ErrCompressionUnsupported) {
						b.Skip(err)
					}
					b.Fatal(err)
				}
				size = res.Size
			}
			b.ReportMetric(float64(size)/(1<<20), "MiB")
		})
	}
}
