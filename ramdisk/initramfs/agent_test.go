package initramfs

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

func TestLdflagsVersion(t *testing.T) {
	for in, want := range map[string]string{
		"-s -w -X main.version=1.2.3":                "1.2.3",
		"-X main.other=x -X main.version=v0.1-dirty": "v0.1-dirty",
		"-X=main.version=2.0":                        "2.0",
		"-X 'main.version=3.0'":                      "3.0",
		"-s -w":                                      "",
		"-X castiron/ramdisk/agent.version=not-mine": "",
	} {
		if got := ldflagsVersion(in); got != want {
			t.Errorf("ldflagsVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckAgent(t *testing.T) {
	static := testInit(t)
	if err := checkAgent(static); err != nil {
		t.Errorf("static test init refused: %v", err)
	}
	if got := agentVersion(static); got != testInitVersion {
		t.Errorf("agentVersion = %q, want %q", got, testInitVersion)
	}

	text := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	bad := []string{text, filepath.Join(t.TempDir(), "absent")}
	if sh, err := exec.LookPath("sh"); err == nil {
		if real, err := filepath.EvalSymlinks(sh); err == nil {
			bad = append(bad, real) // dynamically linked on Debian
		}
	}
	for _, p := range bad {
		if err := checkAgent(p); !errors.Is(err, ErrBadAgent) {
			t.Errorf("checkAgent(%s) = %v, want ErrBadAgent", p, err)
		}
	}
}
