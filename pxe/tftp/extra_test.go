package tftp

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
)

// TestExtraAndDynamic: an extra file from another directory (network GRUB
// from the arm64 ramdisk) and a generated per-client file (grub.cfg); other
// paths stay refused.
func TestExtraAndDynamic(t *testing.T) {
	dir := t.TempDir()
	grub := filepath.Join(dir, "grubnetaa64.efi")
	os.WriteFile(grub, []byte("grub binary"), 0o644)
	addr, _ := startServer(t, Config{FS: fstest.MapFS{}, Extra: map[string]string{"grubnetaa64.efi": grub},
		Dynamic: func(_ context.Context, name string, client net.IP) ([]byte, bool) {
			if name != "grub/grub.cfg" {
				return nil, false
			}
			return []byte("set timeout=0 # for " + client.String()), true
		}})
	c := client(t, addr)
	c.RequestTSize(true)
	if got, _, err := fetch(c, "grubnetaa64.efi"); err != nil || string(got) != "grub binary" {
		t.Fatalf("extra file: %q %v", got, err)
	}
	// GRUB names files from the root.
	if got, _, err := fetch(c, "/grubnetaa64.efi"); err != nil || string(got) != "grub binary" {
		t.Fatalf("extra file with a leading slash: %q %v", got, err)
	}
	if _, _, err := fetch(c, "//grubnetaa64.efi"); err == nil {
		t.Fatal("a name with two leading slashes was served")
	}
	got, tsize, err := fetch(c, "grub/grub.cfg")
	if err != nil || string(got) != "set timeout=0 # for 127.0.0.1" || tsize != int64(len(got)) {
		t.Fatalf("dynamic file: %q tsize %d %v", got, tsize, err)
	}
	if _, _, err := fetch(c, "grub/arm64-efi/command.lst"); err == nil {
		t.Fatal("an unknown path was served")
	}
}
