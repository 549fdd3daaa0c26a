package initramfs

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int // sign
	}{
		{"6.1.0-56-amd64", "6.1.0-9-amd64", 1},
		{"6.1.0-9-amd64", "6.1.0-56-amd64", -1},
		{"6.12.0-1-amd64", "6.1.0-56-amd64", 1},
		{"6.1.0-56-amd64", "6.1.0-56-amd64", 0},
		{"6.1.0-056", "6.1.0-56", 0},
		{"6.1.0-56-amd64", "6.1.0-56", 1},
		{"5.10.0-30-amd64", "6.1.0-1-amd64", -1},
		{"6.1.0-56-cloud-amd64", "6.1.0-56-amd64", 1},
	}
	for _, tt := range tests {
		if got := sign(compareVersions(tt.a, tt.b)); got != tt.want {
			t.Errorf("compareVersions(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}

func TestFindKernel(t *testing.T) {
	root, boot := t.TempDir(), t.TempDir()
	touch := func(p string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"6.1.0-9-amd64", "6.1.0-56-amd64"} { // complete
		touch(filepath.Join(root, v, "modules.dep"))
		touch(filepath.Join(boot, "vmlinuz-"+v))
	}
	touch(filepath.Join(root, "6.2.0-1-amd64", "modules.dep")) // modules, no image
	touch(filepath.Join(boot, "vmlinuz-7.0.0-1-amd64"))        // image, no modules

	tests := []struct {
		name, root, version string
		want                string
		wantErr             error
	}{
		{"newest complete", root, "", "6.1.0-56-amd64", nil},
		{"named", root, "6.1.0-9-amd64", "6.1.0-9-amd64", nil},
		{"named without image", root, "6.2.0-1-amd64", "", ErrNoKernel},
		{"named without modules", root, "7.0.0-1-amd64", "", ErrNoKernel},
		{"no kernels", t.TempDir(), "", "", ErrNoKernel},
		{"no modules root", filepath.Join(root, "nope"), "", "", ErrNoKernel},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, err := findKernel(context.Background(), tt.root, boot, tt.version)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			}
			if k.version != tt.want {
				t.Errorf("version = %q, want %q", k.version, tt.want)
			}
		})
	}
}

func TestCheckCompression(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	both := write("both", "CONFIG_RD_GZIP=y\nCONFIG_RD_ZSTD=y\nCONFIG_RD_LZ4=y\n")
	gzipOnly := write("gzip", "CONFIG_RD_GZIP=y\n# CONFIG_RD_ZSTD is not set\n")
	tests := []struct {
		config string
		c      Compression
		ok     bool
	}{
		{both, Gzip, true},
		{both, Zstd, true},
		{both, LZ4, true},
		{gzipOnly, Gzip, true},
		{gzipOnly, Zstd, false},
		{gzipOnly, LZ4, false},
		{gzipOnly, None, true},                     // nothing to decompress
		{filepath.Join(dir, "absent"), Gzip, true}, // every kernel has gzip
		{filepath.Join(dir, "absent"), Zstd, false},
		{filepath.Join(dir, "absent"), None, true},
	}
	for _, tt := range tests {
		err := kernel{version: "v", configPath: tt.config}.checkCompression(tt.c)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrCompressionUnsupported)) {
			t.Errorf("%s with %s: err = %v, want ok=%v", tt.c, filepath.Base(tt.config), err, tt.ok)
		}
	}
}

func TestParseCompression(t *testing.T) {
	for in, want := range map[string]Compression{"": "", "gzip": Gzip, "zstd": Zstd, "lz4": LZ4, "none": None} {
		if got, err := ParseCompression(in); err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %q, %v", in, got, err)
		}
	}
	for _, bad := range []string{"xz", "GZIP", "lzo"} {
		if _, err := ParseCompression(bad); !errors.Is(err, ErrCompressionUnsupported) {
			t.Errorf("%s: err = %v", bad, err)
		}
	}
}
