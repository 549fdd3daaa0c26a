package initramfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// kernel is the host kernel the ramdisk is built for.
type kernel struct {
	version    string
	imagePath  string // BootDir/vmlinuz-<ver>
	configPath string // BootDir/config-<ver> (may be absent)
	modulesDir string // ModulesRoot/<ver>
}

// findKernel returns the kernel named by version, or, when version is empty,
// the newest one in modulesRoot that has both modules.dep and a kernel image.
func findKernel(ctx context.Context, modulesRoot, bootDir, version string) (kernel, error) {
	if err := ctx.Err(); err != nil {
		return kernel{}, err
	}
	if version != "" {
		k := kernelFor(modulesRoot, bootDir, version)
		if err := k.check(); err != nil {
			return kernel{}, err
		}
		return k, nil
	}
	entries, err := os.ReadDir(modulesRoot)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return kernel{}, fmt.Errorf("list kernels: %w", err)
	}
	var best kernel
	for _, e := range entries {
		k := kernelFor(modulesRoot, bootDir, e.Name())
		if k.check() != nil {
			continue
		}
		if best.version == "" || compareVersions(k.version, best.version) > 0 {
			best = k
		}
	}
	if best.version == "" {
		return kernel{}, fmt.Errorf("%w: no %s/vmlinuz-<ver> with %s/<ver>/modules.dep", ErrNoKernel, bootDir, modulesRoot)
	}
	return best, nil
}

func kernelFor(modulesRoot, bootDir, version string) kernel {
	return kernel{
		version:    version,
		imagePath:  filepath.Join(bootDir, "vmlinuz-"+version),
		configPath: filepath.Join(bootDir, "config-"+version),
		modulesDir: filepath.Join(modulesRoot, version),
	}
}

func (k kernel) check() error {
	if fi, err := os.Stat(k.imagePath); err != nil || !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: kernel %s: no image %s", ErrNoKernel, k.version, k.imagePath)
	}
	if _, err := os.Stat(filepath.Join(k.modulesDir, "modules.dep")); err != nil {
		return fmt.Errorf("%w: kernel %s: no %s/modules.dep", ErrNoKernel, k.version, k.modulesDir)
	}
	return nil
}

// checkCompression makes sure the kernel can unpack an initramfs compressed
// with c, from its config file. Without a config file gzip is assumed to work
// (every distribution kernel has it) and anything else is refused.
func (k kernel) checkCompression(c Compression) error {
	key := c.kernelConfigKey()
	if key == "" {
		return nil
	}
	val, found, err := kernelConfigValue(k.configPath, key)
	switch {
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read kernel config: %w", err)
	case err != nil && c == Gzip:
		return nil
	case err != nil:
		return fmt.Errorf("%w: %s: cannot confirm %s=y without %s", ErrCompressionUnsupported, c, key, k.configPath)
	case !found || val != "y":
		return fmt.Errorf("%w: %s: kernel %s is built without %s=y", ErrCompressionUnsupported, c, k.version, key)
	}
	return nil
}

// kernelConfigValue returns the value of key in a kernel .config file.
func kernelConfigValue(path, key string) (value string, found bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	prefix := key + "="
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v, true, nil
		}
	}
	return "", false, sc.Err()
}

// compareVersions orders kernel release strings the way people read them:
// digit runs compare as numbers ("6.1.0-56" > "6.1.0-9"), the rest as text.
func compareVersions(a, b string) int {
	for a != "" && b != "" {
		ra, restA := nextRun(a)
		rb, restB := nextRun(b)
		if c := compareRuns(ra, rb); c != 0 {
			return c
		}
		a, b = restA, restB
	}
	return len(a) - len(b)
}

func nextRun(s string) (run, rest string) {
	digit := isDigit(s[0])
	i := 1
	for i < len(s) && isDigit(s[i]) == digit {
		i++
	}
	return s[:i], s[i:]
}

func compareRuns(a, b string) int {
	if isDigit(a[0]) && isDigit(b[0]) {
		a, b = strings.TrimLeft(a, "0"), strings.TrimLeft(b, "0")
		if len(a) != len(b) {
			return len(a) - len(b)
		}
	}
	return strings.Compare(a, b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }
