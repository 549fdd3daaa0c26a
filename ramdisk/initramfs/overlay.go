package initramfs

import (
	"context"
	"io"
	"sort"
)

// WriteOverlay writes files (archive names such as
// "etc/castiron/network_data.json", mode 0644, with their parent
// directories) as an uncompressed newc archive. A boot loader that loads it
// as a second initrd after the ramdisk's makes the kernel unpack it over
// the ramdisk's root: per-node files without rebuilding the ramdisk. Equal
// files give equal bytes.
func WriteOverlay(ctx context.Context, w io.Writer, files map[string][]byte) error {
	l := newLayout()
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		l.file(name, 0o644, files[name])
	}
	return l.writeCPIO(ctx, w, None)
}
