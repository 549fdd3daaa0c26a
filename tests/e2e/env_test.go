//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Files the VMs boot with (Debian packages ovmf, ipxe-qemu).
const (
	ovmfCode    = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	ovmfVars    = "/usr/share/OVMF/OVMF_VARS_4M.fd"
	aavmfCode   = "/usr/share/AAVMF/AAVMF_CODE.fd" // Debian qemu-efi-aarch64
	aavmfVars   = "/usr/share/AAVMF/AAVMF_VARS.fd"
	ipxeQemuROM = "/usr/lib/ipxe/qemu/efi-virtio.rom" // qemu's default virtio-net ROM (BIOS iPXE)
	ipxeDir     = "/usr/lib/ipxe"                     // undionly.kpxe, snponly.efi for castiron
)

// ipxeDirFor is where castiron serves iPXE from: E2E_IPXE_DIR (e.g. an
// iPXE built with other settings, to measure them), else Debian's.
func ipxeDirFor() string {
	if dir := os.Getenv("E2E_IPXE_DIR"); dir != "" {
		return dir
	}
	return ipxeDir
}

// unavailable skips the test, or fails it under CI=true, where a missing
// tool or privilege is a broken CI image rather than a reason to skip.
func unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("e2e: %s (CI=true: not skipping)", msg)
	}
	t.Skip("e2e: " + msg)
}

// requireLab checks root, /dev/net/tun and the programs every lab needs.
func requireLab(t testing.TB, extra ...string) {
	t.Helper()
	if runtime.GOOS != "linux" {
		unavailable(t, "needs Linux network namespaces")
	}
	if os.Geteuid() != 0 {
		unavailable(t, "needs root (network namespaces, taps, qemu); run: sudo make e2e")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		unavailable(t, "no /dev/net/tun: %v", err)
	}
	tools := append([]string{"ip", "sysctl", "qemu-system-x86_64", "ipmi_sim", "ipmitool"}, extra...)
	for _, tool := range tools {
		if strings.HasPrefix(tool, "/") {
			if _, err := os.Stat(tool); err != nil {
				unavailable(t, "missing %s (Debian packages: qemu-system-x86 ipxe-qemu ovmf qemu-efi-aarch64 openipmi ipmitool tcpdump)", tool)
			}
			continue
		}
		if _, err := exec.LookPath(tool); err != nil {
			unavailable(t, "missing %s (Debian packages: iproute2 procps qemu-system-x86 qemu-system-arm openipmi ipmitool tcpdump)", tool)
		}
	}
}

// repoRoot is the castiron module root (tests run in tests/e2e).
func repoRoot(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	root := filepath.Clean(filepath.Join(wd, "..", ".."))
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("e2e: %s is not the module root: %v", root, err)
	}
	return root
}

// testdataPath is the absolute path of a file in testdata.
func testdataPath(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("e2e: %v", err)
	}
	return p
}

// ramdiskDir is where castiron finds the agent's kernel and initramfs:
// CASTIRON_RAMDISK_DIR, else <repo>/castiron-data/ramdisk (`make ramdisk`).
func ramdiskDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("CASTIRON_RAMDISK_DIR")
	if dir == "" {
		dir = filepath.Join(repoRoot(t), "castiron-data", "ramdisk")
	}
	if _, err := os.Stat(filepath.Join(dir, "vmlinuz")); err != nil {
		unavailable(t, "no ramdisk kernel in %s (run `make ramdisk` or set CASTIRON_RAMDISK_DIR): %v", dir, err)
	}
	if m, _ := filepath.Glob(filepath.Join(dir, "initramfs*")); len(m) == 0 {
		unavailable(t, "no initramfs* in %s (run `make ramdisk` or set CASTIRON_RAMDISK_DIR)", dir)
	}
	return dir
}

// arm64RamdiskDir skips unless E2E_ARM64=1 (make e2e and make e2e-arm64
// set it after `make ramdisk ARCH=arm64`; a plain go test run lacks the
// arm64 ramdisk), then skips (fails in CI) without the arm64 ramdisk that
// `make ramdisk ARCH=arm64` writes next to the amd64 one.
func arm64RamdiskDir(t testing.TB) string {
	t.Helper()
	if os.Getenv("E2E_ARM64") != "1" {
		t.Skip("arm64 VM test: run make e2e or make e2e-arm64 (E2E_ARM64=1)")
	}
	dir := filepath.Join(ramdiskDir(t), "aarch64")
	for _, f := range []string{"vmlinuz", "initramfs", "grubnetaa64.efi"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			unavailable(t, "no arm64 ramdisk in %s (run `make ramdisk ARCH=arm64`): %v", dir, err)
		}
	}
	return dir
}
