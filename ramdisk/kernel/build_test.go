// Package kernel holds the small VM kernel's config fragment (vm.config)
// and its build script (build.sh); the tests check the script's logic
// against a stand-in kernel source tree, so they run in a second.
package kernel

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeMakefile stands in for the kernel's: tinyconfig writes a base
// .config, olddefconfig drops CONFIG_DROPPED (as Kconfig drops an option
// whose dependency is off), bzImage writes an image and modules.builtin.
// Every call is logged to $FAKE_LOG, so a test can see whether it ran.
const fakeMakefile = `
tinyconfig:
	@echo tinyconfig >> $(FAKE_LOG)
	@printf 'CONFIG_BASE=y\n' > .config
olddefconfig:
	@echo olddefconfig >> $(FAKE_LOG)
	@grep -v '^CONFIG_DROPPED=' .config > .config.new; mv .config.new .config
bzImage:
	@echo bzImage >> $(FAKE_LOG)
	@mkdir -p arch/x86/boot
	@echo "image built $(KBUILD_BUILD_TIMESTAMP)" > arch/x86/boot/bzImage
	@printf 'kernel/drivers/net/virtio_net.ko\n' > modules.builtin
kernelrelease:
	@echo 6.1.192-castiron-vm
`

// fakeMerge appends the fragment to .config, as merge_config.sh -m does.
const fakeMerge = `#!/bin/sh
shift
cat "$2" >> "$1"
`

// fakeSource writes a tarball laid out like linux-source's (one top
// directory) with the stand-ins above.
func fakeSource(t *testing.T) string {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name, body string
		mode       int64
	}{
		{"linux-source-6.1/Makefile", fakeMakefile, 0o644},
		{"linux-source-6.1/scripts/kconfig/merge_config.sh", fakeMerge, 0o755},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		tw.Write([]byte(f.body))
	}
	tw.Close()
	gz.Close()
	p := filepath.Join(t.TempDir(), "linux-source-6.1.tar.gz")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

type buildRun struct {
	out, stderr string
	calls       []string
	err         error
}

func runBuild(t *testing.T, frag, src, cache string) buildRun {
	t.Helper()
	for _, tool := range []string{"make", "tar", "gzip", "sha256sum"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("no %s", tool)
		}
	}
	log := filepath.Join(t.TempDir(), "calls")
	script, err := filepath.Abs("build.sh")
	if err != nil {
		t.Fatal(err)
	}
	// Run from the fragment's directory with a relative path, as make does.
	cmd := exec.Command(script, filepath.Base(frag), src, cache)
	cmd.Dir = filepath.Dir(frag)
	// The real tools are checked by name only; stand-ins keep the test
	// independent of whether a compiler is installed.
	bin := t.TempDir()
	for _, tool := range []string{"gcc", "bc", "bison", "flex", "lz4", "xz", "perl"} {
		if _, err := exec.LookPath(tool); err != nil {
			os.WriteFile(filepath.Join(bin, tool), []byte("#!/bin/sh\n"), 0o755)
		}
	}
	cmd.Env = append(os.Environ(), "FAKE_LOG="+log, "PATH="+bin+":"+os.Getenv("PATH"), "SOURCE_DATE_EPOCH=1700000000", "TMPDIR="+t.TempDir())
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r := buildRun{err: cmd.Run(), out: strings.TrimSpace(stdout.String()), stderr: stderr.String()}
	if b, err := os.ReadFile(log); err == nil {
		r.calls = strings.Fields(string(b))
	}
	return r
}

func writeFragment(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "vm.config")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestBuildCachesByConfig(t *testing.T) {
	src := fakeSource(t)
	cache := t.TempDir()
	frag := writeFragment(t, "CONFIG_VIRTIO_NET=y\n")

	first := runBuild(t, frag, src, cache)
	if first.err != nil {
		t.Fatalf("build: %v\n%s", first.err, first.stderr)
	}
	if want := []string{"tinyconfig", "olddefconfig", "bzImage"}; strings.Join(first.calls, " ") != strings.Join(want, " ") {
		t.Errorf("make targets %q, want %q", first.calls, want)
	}
	dir := first.out
	if filepath.Dir(dir) != cache {
		t.Fatalf("last stdout line %q: want an entry of %s", dir, cache)
	}
	kver, _ := os.ReadFile(filepath.Join(dir, "kver"))
	if strings.TrimSpace(string(kver)) != "6.1.192-castiron-vm" {
		t.Errorf("kver %q", kver)
	}
	img, err := os.ReadFile(filepath.Join(dir, "boot/vmlinuz-6.1.192-castiron-vm"))
	if err != nil || !strings.Contains(string(img), "@1700000000") {
		t.Errorf("image %q (%v): want the bzImage, built with SOURCE_DATE_EPOCH", img, err)
	}
	cfg, _ := os.ReadFile(filepath.Join(dir, "boot/config-6.1.192-castiron-vm"))
	if !strings.Contains(string(cfg), "CONFIG_VIRTIO_NET=y") || !strings.Contains(string(cfg), "CONFIG_BASE=y") {
		t.Errorf("config %q: want tinyconfig's base and the fragment", cfg)
	}
	for _, f := range []string{"modules.dep", "modules.builtin"} {
		if _, err := os.Stat(filepath.Join(dir, "lib/modules/6.1.192-castiron-vm", f)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "*.tmp")); len(left) > 0 {
		t.Errorf("left behind: %q", left)
	}

	again := runBuild(t, frag, src, cache)
	if again.err != nil || again.out != dir || len(again.calls) != 0 {
		t.Errorf("second build: out %q err %v make calls %q; want %q from the cache, no make", again.out, again.err, again.calls, dir)
	}

	os.WriteFile(frag, []byte("CONFIG_VIRTIO_NET=y\nCONFIG_E1000=y\n"), 0o644)
	changed := runBuild(t, frag, src, cache)
	if changed.err != nil || changed.out == dir || len(changed.calls) == 0 {
		t.Errorf("after a config change: out %q err %v make calls %q; want a new build in a new entry", changed.out, changed.err, changed.calls)
	}
}

// An option olddefconfig drops (its dependency is off) fails the build
// and names the option, instead of a kernel silently without a driver.
func TestBuildFailsOnDroppedOption(t *testing.T) {
	cache := t.TempDir()
	r := runBuild(t, writeFragment(t, "CONFIG_VIRTIO_NET=y\nCONFIG_DROPPED=y\n"), fakeSource(t), cache)
	if r.err == nil {
		t.Fatalf("build succeeded (%q); want a failure naming CONFIG_DROPPED", r.out)
	}
	if !strings.Contains(r.stderr, "CONFIG_DROPPED=y") || strings.Contains(r.stderr, "CONFIG_VIRTIO_NET=y") {
		t.Errorf("stderr %q: want CONFIG_DROPPED=y named, and only it", r.stderr)
	}
	if entries, _ := os.ReadDir(cache); len(entries) != 0 {
		t.Errorf("cache has %d entries after a failed build", len(entries))
	}
}

func TestBuildWithoutSource(t *testing.T) {
	r := runBuild(t, writeFragment(t, "CONFIG_VIRTIO_NET=y\n"), filepath.Join(t.TempDir(), "missing.tar.xz"), t.TempDir())
	if r.err == nil || !strings.Contains(r.stderr, "apt-get install linux-source-6.1") {
		t.Errorf("err %v, stderr %q: want a failure that says what to install", r.err, r.stderr)
	}
}

// vm.config is a Kconfig fragment: each line a comment, blank, or one
// CONFIG_ option set once.
func TestFragmentWellFormed(t *testing.T) {
	f, err := os.Open("vm.config")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opt := regexp.MustCompile(`^(CONFIG_[A-Z0-9_]+)=(y|[0-9]+|"[^"]*")$`)
	seen := map[string]int{}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		m := opt.FindStringSubmatch(line)
		if m == nil {
			t.Errorf("vm.config:%d: %q is not CONFIG_NAME=y|number|\"string\"", n, line)
			continue
		}
		if prev, dup := seen[m[1]]; dup {
			t.Errorf("vm.config:%d: %s set again (line %d)", n, m[1], prev)
		}
		seen[m[1]] = n
	}
	// Things the ramdisk cannot boot or work without.
	for _, must := range []string{"CONFIG_64BIT", "CONFIG_BLK_DEV_INITRD", "CONFIG_RD_LZ4", "CONFIG_EFI_STUB",
		"CONFIG_DEVTMPFS", "CONFIG_PACKET", "CONFIG_VIRTIO_NET", "CONFIG_VIRTIO_BLK", "CONFIG_SERIAL_8250_CONSOLE"} {
		if seen[must] == 0 {
			t.Errorf("vm.config lacks %s", must)
		}
	}
}
