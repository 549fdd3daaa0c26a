package coldplug

import (
	"bufio"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
)

func TestAliasMatch(t *testing.T) {
	const virtioNetPCI = "pci:v00001AF4d00001000sv00001AF4sd00000001bc02sc00i00"
	tests := []struct {
		pattern, modalias string
		want              bool
	}{
		{"pci:v00001AF4d*sv*sd*bc*sc*i*", virtioNetPCI, true},
		{"pci:v00008086d0000100Esv*sd*bc*sc*i*", virtioNetPCI, false},
		{"pci:v*d*sv*sd*bc01sc06i01*", "pci:v00008086d00002922sv00001AF4sd00001100bc01sc06i01", true},
		{"pci:v*d*sv*sd*bc01sc06i01*", virtioNetPCI, false},
		{"virtio:d00000001v*", "virtio:d00000001v00001AF4", true},
		{"virtio:d00000001v*", "virtio:d00000002v00001AF4", false},
		{"scsi:t-0x00*", "scsi:t-0x00", true},
		{"scsi:t-0x00*", "scsi:t-0x05", false},
		{"acpi*:PNP0A03:*", "acpi:PNP0A03:", true},
		{"cpu:type:x86,ven*fam*mod*:feature:*0081*", "cpu:type:x86,ven0000fam0006mod003F:feature:,0000,0081,0094", true},
		// '[' classes, as file2alias writes for USB bcdDevice ranges.
		{"usb:v13FDp3940d0[0-2]*dc*", "usb:v13FDp3940d0150dc00", true},
		{"usb:v13FDp3940d0[0-2]*dc*", "usb:v13FDp3940d0350dc00", false},
		// fnmatch's negation is '!' ('^' works in glibc too).
		{"x:[!a]y", "x:by", true},
		{"x:[!a]y", "x:ay", false},
		{"x:[^a]y", "x:by", true},
		// Without FNM_PATHNAME, '*' and '?' match '/' as well.
		{"of:N*T*Cfsl,imx*", "of:NuartT(null)Cfsl,imx6/uart", true},
		{"of:N?T", "of:N/T", true},
		{"of:Na/bT*", "of:Na/bTc", true},
		{"of:Na/bT*", "of:NaxbTc", false},
		// An escaped special character is literal.
		{`x:a\*b`, "x:a*b", true},
		{`x:a\*b`, "x:axxb", false},
		{`x:a\[!b]`, "x:a[!b]", true},
		// Exact aliases are aliases too.
		{"platform:serial8250", "platform:serial8250", true},
		{"platform:serial8250", "platform:serial8250x", false},
		// A malformed pattern matches nothing.
		{"x:[a", "x:a", false},
	}
	for _, tt := range tests {
		if got := newAliasPattern(tt.pattern, "m").match(tt.modalias); got != tt.want {
			t.Errorf("%q matches %q: got %v, want %v", tt.pattern, tt.modalias, got, tt.want)
		}
	}
}

func TestIsDeviceAlias(t *testing.T) {
	for pattern, want := range map[string]bool{
		"pci:v00001AF4d*sv*sd*bc*sc*i*": true,
		"acpi*:PNP0A03:*":               true,
		"virtio:d00000001v*":            true,
		"devname:loop-control":          false,
		"block-major-7-*":               false,
		"char-major-10-237":             false,
		"fs-efivarfs":                   false,
		"crypto-crct10dif":              false,
		"crct10dif":                     false,
	} {
		if got := isDeviceAlias(pattern); got != want {
			t.Errorf("isDeviceAlias(%q) = %v, want %v", pattern, got, want)
		}
	}
}

// Every alias of the host's kernel is a pattern path.Match accepts once
// rewritten (a malformed one would silently never match).
func TestHostKernelAliasesAreValidPatterns(t *testing.T) {
	files, _ := filepath.Glob("/lib/modules/*/modules.alias")
	if len(files) == 0 {
		t.Skip("no kernel modules.alias on this host")
	}
	f, err := os.Open(files[len(files)-1])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[0] != "alias" {
			continue
		}
		n++
		if _, err := path.Match(toPathMatch(fields[1]), "x"); err != nil {
			t.Errorf("%s: %q: %v", f.Name(), fields[1], err)
		}
	}
	t.Logf("%d aliases in %s", n, f.Name())
}

func BenchmarkMatch(b *testing.B) {
	files, _ := filepath.Glob("/lib/modules/*/modules.alias")
	if len(files) == 0 {
		b.Skip("no kernel modules.alias on this host")
	}
	dir := b.TempDir()
	// The host's aliases for a few of the ramdisk's modules.
	order := "kernel/a/virtio_pci.ko\nkernel/a/e1000e.ko\nkernel/a/ahci.ko\nkernel/a/ixgbe.ko\nkernel/a/tg3.ko\nkernel/a/mpt3sas.ko\n"
	os.WriteFile(filepath.Join(dir, "modules.order"), []byte(order), 0o644)
	alias, _ := os.ReadFile(files[len(files)-1])
	os.WriteFile(filepath.Join(dir, AliasFile), alias, 0o644)
	os.WriteFile(filepath.Join(dir, DepFile), nil, 0o644)
	ix, err := ReadIndex(filepath.Join(dir, "modules.order"), dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%d patterns", len(ix.patterns))
	modalias := "pci:v00008086d000010D3sv00001AF4sd00001100bc02sc00i00"
	for b.Loop() {
		ix.Match(modalias)
	}
}
