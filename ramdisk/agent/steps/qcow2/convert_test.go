package qcow2

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// memTarget is a disk in memory, filled with garbage so that missing
// zeroing shows.
type memTarget struct{ b []byte }

func newMemTarget(size int64) *memTarget {
	return &memTarget{b: bytes.Repeat([]byte{0xa5}, int(size))}
}

func (m *memTarget) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > int64(len(m.b)) {
		return 0, fmt.Errorf("write of %d at %d beyond %d", len(p), off, len(m.b))
	}
	return copy(m.b[off:], p), nil
}

func (m *memTarget) ZeroRange(off, n int64) error {
	if off < 0 || off+n > int64(len(m.b)) {
		return fmt.Errorf("zero of %d at %d beyond %d", n, off, len(m.b))
	}
	clear(m.b[off : off+n])
	return nil
}

func needQemuImg(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("qemu-img is required in CI")
		}
		t.Skip("qemu-img not installed")
	}
}

func run(t testing.TB, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

// rawImage writes a raw image of size bytes mixing random data, a
// compressible pattern and holes, so that qemu-img produces data, zero and
// unallocated clusters.
func rawImage(t testing.TB, dir string, size int64) (string, []byte) {
	t.Helper()
	b := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, uint64(size)))
	for off := int64(0); off < size; off += 96 << 10 {
		end := min(off+96<<10, size)
		switch (off / (96 << 10)) % 4 {
		case 0:
			for i := off; i < end; i++ {
				b[i] = byte(rng.Uint32())
			}
		case 1:
			for i := off; i < end; i++ {
				b[i] = byte(i / 4096)
			}
		case 2: // hole
		case 3:
			copy(b[off:end], bytes.Repeat([]byte("castiron "), int(end-off)/9+1))
		}
	}
	p := filepath.Join(dir, "disk.raw")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b
}

func convertFile(t *testing.T, path string, size int64, opts Options) (*memTarget, Stats, error) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dst := newMemTarget(size)
	st, err := Convert(context.Background(), f, dst, opts)
	return dst, st, err
}

func TestConvertMatchesQemu(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	const size = 3<<20 + 3*512 // not a whole number of clusters
	raw, want := rawImage(t, dir, size)
	tests := []struct {
		name string
		args []string
	}{
		{"v3 64k", []string{"-O", "qcow2"}},
		{"v2 64k", []string{"-O", "qcow2", "-o", "compat=0.10"}},
		{"v3 512", []string{"-O", "qcow2", "-o", "cluster_size=512"}},
		{"v3 4k", []string{"-O", "qcow2", "-o", "cluster_size=4096"}},
		{"v3 2M", []string{"-O", "qcow2", "-o", "cluster_size=2M"}},
		{"zlib 64k", []string{"-c", "-O", "qcow2"}},
		{"zlib 512", []string{"-c", "-O", "qcow2", "-o", "cluster_size=512"}},
		{"zlib v2 4k", []string{"-c", "-O", "qcow2", "-o", "compat=0.10,cluster_size=4096"}},
		{"zstd 64k", []string{"-c", "-O", "qcow2", "-o", "compression_type=zstd"}},
		{"zstd 1k", []string{"-c", "-O", "qcow2", "-o", "compression_type=zstd,cluster_size=1024"}},
		{"preallocated metadata", []string{"-O", "qcow2", "-o", "preallocation=metadata"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			q := filepath.Join(t.TempDir(), "disk.qcow2")
			run(t, "qemu-img", append(append([]string{"convert"}, tc.args...), raw, q)...)
			got, st, err := convertFile(t, q, size, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.b, want) {
				t.Fatalf("converted image differs from the raw image (stats %+v)", st)
			}
			if st.MaxBuffered > max(1<<20, 2*st.Header.ClusterSize()) {
				t.Errorf("buffered %d bytes for a front-to-back image", st.MaxBuffered)
			}
		})
	}
}

// TestConvertOddLayouts: zero clusters, an L1 table moved to the end of
// the file (all tables after the data), and tables written out of order.
func TestConvertOddLayouts(t *testing.T) {
	needQemuImg(t)
	if _, err := exec.LookPath("qemu-io"); err != nil {
		t.Skip("qemu-io not installed")
	}
	dir := t.TempDir()
	q := filepath.Join(dir, "odd.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-o", "cluster_size=4096", q, "1M")
	// Write guest clusters back to front so tables and data interleave
	// oddly, then zero one and grow the image so that the L1 table moves
	// past everything else.
	run(t, "qemu-io", "-c", "write -P 0x11 900k 8k", "-c", "write -P 0x22 0 12k", "-c", "write -P 0x33 500k 4k", q)
	run(t, "qemu-io", "-c", "write -z 4k 4k", q)
	run(t, "qemu-img", "resize", "-q", q, "40M")
	run(t, "qemu-io", "-c", "write -P 0x44 30M 8k", q)
	want := filepath.Join(dir, "odd.raw")
	run(t, "qemu-img", "convert", "-O", "raw", q, want)
	wantB, _ := os.ReadFile(want)
	got, st, err := convertFile(t, q, int64(len(wantB)), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.b, wantB) {
		t.Fatalf("converted image differs (stats %+v)", st)
	}
	t.Logf("buffered at most %d bytes", st.MaxBuffered)
	_, _, err = convertFile(t, q, int64(len(wantB)), Options{MaxBuffered: 4096})
	var ue *UnsupportedError
	if st.MaxBuffered > 4096 && !errors.As(err, &ue) {
		t.Fatalf("want the buffer limit to refuse, got %v", err)
	}
}

func TestConvertRefuses(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	raw, _ := rawImage(t, dir, 1<<20)
	q := filepath.Join(dir, "d.qcow2")
	run(t, "qemu-img", "convert", "-c", "-O", "qcow2", raw, q)
	good, _ := os.ReadFile(q)
	back := filepath.Join(dir, "back.qcow2")
	run(t, "qemu-img", "create", "-q", "-f", "qcow2", "-b", q, "-F", "qcow2", back)
	backing, _ := os.ReadFile(back)

	patch := func(off int, b ...byte) []byte {
		c := append([]byte(nil), good...)
		copy(c[off:], b)
		return c
	}
	var unsupportedErr *UnsupportedError
	var corruptErr *CorruptError
	tests := []struct {
		name string
		img  []byte
		want any
	}{
		{"backing file", backing, &unsupportedErr},
		{"encrypted", patch(32, 0, 0, 0, 1), &unsupportedErr},
		{"version 4", patch(4, 0, 0, 0, 4), &unsupportedErr},
		{"external data file", patch(79, 4), &unsupportedErr},
		{"marked corrupt", patch(79, 2), &corruptErr},
		{"cluster bits", patch(20, 0, 0, 0, 30), &corruptErr},
		{"truncated", good[:len(good)/2], &corruptErr},
		{"header only", good[:100], &corruptErr},
		{"not qcow2", bytes.Repeat([]byte{1}, 4096), &corruptErr},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Convert(context.Background(), bytes.NewReader(tc.img), newMemTarget(1<<20), Options{})
			if !errors.As(err, tc.want) {
				t.Fatalf("got %v (%T)", err, err)
			}
		})
	}
	t.Run("check header", func(t *testing.T) {
		tooBig := errors.New("too big")
		_, err := Convert(context.Background(), bytes.NewReader(good), newMemTarget(1<<20), Options{CheckHeader: func(h Header) error {
			if h.VirtualSize != 1<<20 {
				t.Errorf("virtual size %d", h.VirtualSize)
			}
			return tooBig
		}})
		if !errors.Is(err, tooBig) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("cancelled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err := Convert(ctx, bytes.NewReader(good), newMemTarget(1<<20), Options{})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("got %v", err)
		}
	})
}

// sampler is a target that throws data away and samples the heap.
type sampler struct {
	calls   int
	maxHeap uint64
}

func (s *sampler) sample() {
	s.calls++
	if s.calls%64 == 0 {
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		s.maxHeap = max(s.maxHeap, m.HeapInuse)
	}
}

func (s *sampler) WriteAt(p []byte, off int64) (int, error) { s.sample(); return len(p), nil }
func (s *sampler) ZeroRange(off, n int64) error             { s.sample(); return nil }

// TestConvertMemory: a large compressed image converts in little memory
// (an L2 table maps thousands of compressed clusters).
func TestConvertMemory(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	raw := filepath.Join(dir, "big.raw")
	b := make([]byte, 96<<20)
	for i := range b {
		b[i] = byte(i/512) ^ byte(i/7)
	}
	os.WriteFile(raw, b, 0o644)
	b = nil
	q := filepath.Join(dir, "big.qcow2")
	run(t, "qemu-img", "convert", "-c", "-O", "qcow2", raw, q)
	os.Remove(raw)
	f, err := os.Open(q)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	s := &sampler{}
	st, err := Convert(context.Background(), f, s, Options{})
	if err != nil {
		t.Fatal(err)
	}
	grew := int64(s.maxHeap) - int64(before.HeapInuse)
	t.Logf("heap grew by at most %d MiB; stats %+v", grew>>20, st)
	if grew > 48<<20 {
		t.Fatalf("heap grew by %d MiB", grew>>20)
	}
}
