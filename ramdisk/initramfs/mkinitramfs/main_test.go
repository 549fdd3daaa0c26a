package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"castiron/ramdisk/initramfs"
)

func TestParseModules(t *testing.T) {
	defaults := initramfs.DefaultModules()
	full := initramfs.FullModules()
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"virtio_net, virtio_blk,", []string{"virtio_net", "virtio_blk"}},
		{"+hv_netvsc", append(defaults, "hv_netvsc")},
		{"full", full},
		{"full,hv_netvsc", append(full, "hv_netvsc")},
		{"default", defaults},
	}
	for _, tt := range tests {
		if got := parseModules(tt.in); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("parseModules(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	if got, err := sourceDateEpoch(""); err != nil || !got.IsZero() {
		t.Errorf("unset: %v, %v", got, err)
	}
	if got, err := sourceDateEpoch("1700000000"); err != nil || !got.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("1700000000: %v, %v", got, err)
	}
	if _, err := sourceDateEpoch("yesterday"); err == nil {
		t.Error("no error for a bad value")
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{
		{"-compress", "lz4"},
		{"-extra", "no-equals-sign"},
		{"stray-argument"},
		{"-agent", "/nonexistent", "-modules-root", "../testdata/modules", "-boot-dir", "../testdata/boot", "-out", t.TempDir()},
	} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), args, &stdout, &stderr); err == nil {
			t.Errorf("run(%q): no error", args)
		}
	}
}

// TestRun builds from the testdata kernel, with the boot test's init as the
// (static) agent, and checks what the command prints.
func TestRun(t *testing.T) {
	agent := filepath.Join(t.TempDir(), "init")
	build := exec.Command("go", "build", "-o", agent, "../testdata/testinit")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build test init: %v\n%s", err, b)
	}
	out := filepath.Join(t.TempDir(), "ramdisk")
	var stdout, stderr bytes.Buffer
	err := run(context.Background(), []string{"-agent", agent, "-modules-root", "../testdata/modules", "-boot-dir", "../testdata/boot",
		"-modules", "netdrv,nosuch", "-compress", "zstd", "-out", out}, &stdout, &stderr)
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stderr.String())
	}
	for _, want := range []string{
		filepath.Join(out, "vmlinuz"), "(6.0.0-test)",
		filepath.Join(out, "initramfs"), "zstd, 3 modules",
		"not in kernel 6.0.0-test: nosuch",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(stderr.String(), "nosuch") {
		t.Errorf("no warning about the missing module on stderr: %q", stderr.String())
	}
}
