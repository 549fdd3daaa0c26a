package initramfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/u-root/u-root/pkg/cpio"
)

// entry is one file of the archive. Names have no leading slash ("init",
// "dev/console"), as the kernel's unpacker and cpio(1) expect.
type entry struct {
	name     string
	mode     uint64 // type and permission bits (cpio.S_IFREG|0o755, ...)
	rmajor   uint64 // device numbers of character devices
	rminor   uint64
	data     []byte // contents of generated files
	hostPath string // or contents copied from this host file
	hostSize int64
}

// layout is the archive's tree, keyed by name so every path is written once.
type layout struct {
	entries map[string]entry
}

func newLayout() *layout { return &layout{entries: map[string]entry{}} }

// archiveName turns "/lib/modules/x.ko" into "lib/modules/x.ko".
func archiveName(p string) string { return strings.TrimLeft(path.Clean("/"+p), "/") }

func (l *layout) has(name string) bool {
	_, ok := l.entries[archiveName(name)]
	return ok
}

// dir adds a directory (and its parents).
func (l *layout) dir(name string, perm uint64) {
	name = archiveName(name)
	if name == "" {
		return
	}
	l.parents(name)
	if _, ok := l.entries[name]; !ok {
		l.entries[name] = entry{name: name, mode: cpio.S_IFDIR | perm}
	}
}

// parents adds the missing parent directories of name, 0755: the kernel's
// unpacker does not create them, and skips files whose directory is absent.
func (l *layout) parents(name string) {
	for d := path.Dir(name); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := l.entries[d]; !ok {
			l.entries[d] = entry{name: d, mode: cpio.S_IFDIR | 0o755}
		}
	}
}

// nonDirParent returns a parent of name that exists but is not a directory.
func (l *layout) nonDirParent(name string) (string, bool) {
	for d := path.Dir(archiveName(name)); d != "." && d != "/"; d = path.Dir(d) {
		if e, ok := l.entries[d]; ok && e.mode&cpio.S_IFMT != cpio.S_IFDIR {
			return "/" + d, true
		}
	}
	return "", false
}

func (l *layout) file(name string, perm uint64, data []byte) {
	name = archiveName(name)
	l.parents(name)
	l.entries[name] = entry{name: name, mode: cpio.S_IFREG | perm, data: data}
}

func (l *layout) hostFile(name string, perm uint64, hostPath string, size int64) {
	name = archiveName(name)
	l.parents(name)
	l.entries[name] = entry{name: name, mode: cpio.S_IFREG | perm, hostPath: hostPath, hostSize: size}
}

func (l *layout) charDev(name string, perm, major, minor uint64) {
	name = archiveName(name)
	l.parents(name)
	l.entries[name] = entry{name: name, mode: cpio.S_IFCHR | perm, rmajor: major, rminor: minor}
}

// sorted returns the entries by name; a parent sorts before its children.
func (l *layout) sorted() []entry {
	out := make([]entry, 0, len(l.entries))
	for _, e := range l.entries {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// writeCPIO writes the layout as a newc archive compressed with c. Owners
// are 0:0 and every mtime is 0; inode numbers follow the sorted order. So
// equal layouts give equal bytes.
func (l *layout) writeCPIO(ctx context.Context, w io.Writer, c Compression) error {
	zw, err := newCompressor(w, c)
	if err != nil {
		return err
	}
	rw := cpio.Newc.Writer(zw)
	for i, e := range l.sorted() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := writeEntry(rw, e, uint64(i+1)); err != nil {
			return fmt.Errorf("cpio %s: %w", e.name, err)
		}
	}
	if err := cpio.WriteTrailer(rw); err != nil {
		return err
	}
	return zw.Close()
}

func writeEntry(rw cpio.RecordWriter, e entry, ino uint64) error {
	info := cpio.Info{
		Ino:    ino,
		Mode:   e.mode,
		NLink:  1,
		Rmajor: e.rmajor,
		Rminor: e.rminor,
		Name:   e.name,
	}
	if e.mode&cpio.S_IFMT == cpio.S_IFDIR {
		info.NLink = 2
	}
	rec := cpio.Record{Info: info}
	switch {
	case e.hostPath != "":
		f, err := os.Open(e.hostPath)
		if err != nil {
			return err
		}
		defer f.Close() // the writer closes it too when done; a second Close is harmless
		rec.ReaderAt = f
		rec.FileSize = uint64(e.hostSize)
	case e.mode&cpio.S_IFMT == cpio.S_IFREG:
		rec.ReaderAt = bytes.NewReader(e.data)
		rec.FileSize = uint64(len(e.data))
	}
	return rw.WriteRecord(rec)
}

// newCompressor returns a deterministic compressing writer: no name or time
// in the gzip header, one zstd or lz4 encoder goroutine. Levels measured on
// the 27 MB archive of the full module set: gzip 9 saves 0.8% over 6 for
// 15x the time; zstd "best" saves 6% over "better" for 9x (about 3 s). lz4
// level 9 is what `lz4 -l -9` writes: the kernel's decompression time does
// not depend on the level, the size does.
func newCompressor(w io.Writer, c Compression) (io.WriteCloser, error) {
	switch c {
	case None:
		return nopCloser{w}, nil
	case Gzip:
		return gzip.NewWriterLevel(w, gzip.DefaultCompression)
	case Zstd:
		return zstd.NewWriter(w,
			zstd.WithEncoderLevel(zstd.SpeedBestCompression),
			zstd.WithEncoderConcurrency(1))
	case LZ4:
		return &lz4Legacy{w: w, buf: make([]byte, 0, lz4LegacyChunk), dst: make([]byte, lz4.CompressBlockBound(lz4LegacyChunk))}, nil
	}
	return nil, fmt.Errorf("%w: %q", ErrCompressionUnsupported, c)
}

// The legacy lz4 format (what the kernel's unlz4 reads, `lz4 -l`): a magic
// number, then chunks of 8 MiB of input, each its compressed length
// (little-endian uint32) and one lz4 block.
const (
	lz4LegacyMagic = 0x184C2102
	lz4LegacyChunk = 8 << 20
)

// lz4Legacy writes the legacy lz4 stream itself, block by block with
// pierrec/lz4's block compressor. Written here, not with lz4.Writer's
// LegacyOption: that writer stores a chunk it cannot shrink (8 MiB of
// already compressed bytes) raw with the frame format's "uncompressed" bit
// in its length, which the legacy format does not have: the kernel reads
// the length as 2 GiB and stops ("Initramfs unpacking failed: Decoding
// failed", seen in CI when an image held such a chunk). With a destination
// of CompressBlockBound bytes the block compressor always emits a valid
// block, a little larger than its input when the input is incompressible.
//
// Close ends the stream with a zero chunk length. The format has no end of
// its own: the kernel's unlz4 reads chunks until its input ends, so an
// archive a boot loader appends after ours (castiron's CA overlay, a
// virtual media ISO's network_data) is taken for one more lz4 chunk and
// fails ("Decoding failed", its files missing; seen under qemu with
// Debian's 6.1). unlz4 stops at a zero chunk length and the unpacker skips
// zeros up to the next archive, which it takes for a cpio archive only at
// a multiple of 4 bytes: the zeros also pad the file to that, whether or
// not the boot loader aligns initrds.
type lz4Legacy struct {
	w      io.Writer
	n      int64 // bytes written to w
	buf    []byte
	dst    []byte
	magic  bool
	closed bool
}

func (z *lz4Legacy) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		k := min(len(p), lz4LegacyChunk-len(z.buf))
		z.buf = append(z.buf, p[:k]...)
		p, written = p[k:], written+k
		if len(z.buf) == lz4LegacyChunk {
			if err := z.flush(); err != nil {
				return written, err
			}
		}
	}
	return written, nil
}

func (z *lz4Legacy) flush() error {
	if !z.magic {
		z.magic = true
		if err := z.put(binary.LittleEndian.AppendUint32(nil, lz4LegacyMagic)); err != nil {
			return err
		}
	}
	if len(z.buf) == 0 {
		return nil
	}
	n, err := lz4.CompressBlockHC(z.buf, z.dst, lz4.Level9, nil, nil)
	if err != nil {
		return fmt.Errorf("lz4: %w", err)
	}
	if n == 0 { // only for a destination under CompressBlockBound
		return errors.New("lz4: block not compressed")
	}
	z.buf = z.buf[:0]
	if err := z.put(binary.LittleEndian.AppendUint32(nil, uint32(n))); err != nil {
		return err
	}
	return z.put(z.dst[:n])
}

func (z *lz4Legacy) put(p []byte) error {
	n, err := z.w.Write(p)
	z.n += int64(n)
	return err
}

func (z *lz4Legacy) Close() error {
	if z.closed {
		return nil
	}
	z.closed = true
	if err := z.flush(); err != nil {
		return err
	}
	return z.put(make([]byte, 4+(4-z.n%4)%4))
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
