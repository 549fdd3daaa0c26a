package iso

import (
	"fmt"
	"strings"
)

// Paths inside the ISO. The names are valid ISO 9660 level 1 names (8.3,
// no Rock Ridge needed), because isolinux reads only the primary names.
const (
	isoKernel    = "/boot/vmlinuz"
	isoInitramfs = "/boot/initrd.img"
	isoOverlay   = "/boot/node.img"
	isoLinuxDir  = "/isolinux"
	isoLinuxBin  = "/isolinux/isolinux.bin"
	isoLinuxCat  = "/isolinux/boot.cat"
	isoLinuxCfg  = "/isolinux/isolinux.cfg"
	isoLDLinux   = "/isolinux/ldlinux.c32"
	isoEFIImage  = "/efi/efiboot.img"
	isoGRUBCfg   = "/boot/grub/grub.cfg"
	// isoDiskInfo is the file Debian's CD GRUB searches for to find the CD.
	isoDiskInfo = "/.disk/info"
)

// checkArgs refuses kernel arguments the boot loaders' config syntax would
// change: blanks split words, quotes and backslashes and $ are syntax in
// grub.cfg. The arguments castiron passes (URLs, UUIDs, MACs) need none.
func checkArgs(args []string) error {
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\r\n\"'\\$;{}") {
			return fmt.Errorf("iso: kernel argument %q: empty or holds a blank, quote, backslash, $, ; or brace", a)
		}
	}
	return nil
}

// isolinuxCfg boots at once (no menu, no prompt).
func isolinuxCfg(args []string, overlay bool) string {
	initrd := isoInitramfs
	if overlay {
		initrd += "," + isoOverlay
	}
	return fmt.Sprintf("DEFAULT castiron\nPROMPT 0\nTIMEOUT 0\nLABEL castiron\n  KERNEL %s\n  APPEND initrd=%s %s\n",
		isoKernel, initrd, strings.Join(args, " "))
}

// grubCfg boots at once. Every argument is single-quoted, which GRUB
// passes through verbatim.
func grubCfg(args []string, overlay bool) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = "'" + a + "'"
	}
	initrd := isoInitramfs
	if overlay {
		initrd += " " + isoOverlay
	}
	return fmt.Sprintf("set timeout=0\nset default=0\nset gfxpayload=text\nmenuentry castiron {\n  linux %s %s\n  initrd %s\n}\n",
		isoKernel, strings.Join(quoted, " "), initrd)
}
