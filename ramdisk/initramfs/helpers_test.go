package initramfs

import (
	"bytes"
	"encoding/binary"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/u-root/u-root/pkg/cpio"
)

// testInitVersion is linked into the test init so agentVersion can find it.
const testInitVersion = "1.2.3-test"

var (
	binDir      string // holds binaries the tests build; removed by TestMain
	buildInitFn = sync.OnceValues(buildTestInit)
)

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "initramfs-test-bin-")
	if err != nil {
		panic(err)
	}
	binDir = dir
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// testInit returns testdata/testinit built static, once per test binary.
func testInit(t testing.TB) string {
	t.Helper()
	p, err := buildInitFn()
	if err != nil {
		t.Fatalf("build test init: %v", err)
	}
	return p
}

func buildTestInit() (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(binDir, "testinit")
	// No -trimpath: with it go build does not record -ldflags in the build
	// info, where agentVersion finds the version.
	cmd := exec.Command(goBin, "build", "-ldflags", "-s -w -X main.version="+testInitVersion,
		"-o", out, "./testdata/testinit")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{err: err, out: string(b)}
	}
	return out, nil
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string { return e.err.Error() + "\n" + e.out }

// fakeOptions builds against the testdata kernel 6.0.0-test.
func fakeOptions(t *testing.T) Options {
	t.Helper()
	return Options{
		AgentPath:   testInit(t),
		ModulesRoot: "testdata/modules",
		BootDir:     "testdata/boot",
		Modules:     []string{"netdrv", "blk_drv", "disk", "gzmod", "virtio", "nosuch"},
		OutDir:      t.TempDir(),
	}
}

// archiveFile is one record read back, with its contents.
type archiveFile struct {
	cpio.Info
	data []byte
}

// readArchive decompresses (gzip or zstd, by magic) and parses an initramfs
// with the same cpio library that wrote it, in archive order.
// lz4Stream returns the legacy lz4 stream up to its zero block size (the
// end mark the kernel stops at), checking that only zeros follow it.
func lz4Stream(t *testing.T, raw []byte) []byte {
	t.Helper()
	for pos := 4; pos+4 <= len(raw); {
		size := int(binary.LittleEndian.Uint32(raw[pos:]))
		if size == 0 {
			if rest := raw[pos:]; len(bytes.Trim(rest, "\x00")) != 0 {
				t.Fatalf("lz4: % x after the end mark", rest)
			}
			return raw[:pos]
		}
		pos += 4 + size
	}
	t.Fatal("lz4: no zero block size at the end")
	return nil
}

func readArchive(t *testing.T, path string) []archiveFile {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r io.Reader
	switch {
	case bytes.HasPrefix(raw, []byte{0x1f, 0x8b}):
		gr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		r = gr
	case bytes.HasPrefix(raw, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		zr, err := zstd.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	case bytes.HasPrefix(raw, []byte{0x02, 0x21, 0x4c, 0x18}): // lz4 legacy frame
		r = lz4.NewReader(bytes.NewReader(lz4Stream(t, raw)))
	case bytes.HasPrefix(raw, []byte("070701")): // newc, uncompressed
		r = bytes.NewReader(raw)
	default:
		t.Fatalf("%s: not gzip, zstd, lz4 or a newc archive (% x)", path, raw[:4])
	}
	plain, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decompress %s: %v", path, err)
	}
	recs, err := cpio.ReadAllRecords(cpio.EOFReader{RecordReader: cpio.Newc.Reader(bytes.NewReader(plain))})
	if err != nil {
		t.Fatalf("read cpio %s: %v", path, err)
	}
	files := make([]archiveFile, 0, len(recs))
	for _, rec := range recs {
		data, err := io.ReadAll(io.NewSectionReader(rec.ReaderAt, 0, int64(rec.FileSize)))
		if err != nil {
			t.Fatalf("read %s: %v", rec.Name, err)
		}
		files = append(files, archiveFile{Info: rec.Info, data: data})
	}
	return files
}

func byName(files []archiveFile) map[string]archiveFile {
	m := make(map[string]archiveFile, len(files))
	for _, f := range files {
		m[f.Name] = f
	}
	return m
}
