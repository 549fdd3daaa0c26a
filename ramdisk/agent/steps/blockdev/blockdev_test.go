package blockdev

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func tempDisk(t *testing.T, size int, fill byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(p, bytes.Repeat([]byte{fill}, size), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestWriterGathersAndZeroes(t *testing.T) {
	const size = 40 << 20
	p := tempDisk(t, size, 0xaa)
	dev, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if dev.Size() != size || dev.SectorSize() != 512 || dev.IsBlockDevice() || dev.ReadOnly() {
		t.Fatalf("device %+v", dev)
	}
	w := NewWriter(context.Background(), dev, WriterOptions{BufferSize: 1 << 20, Buffers: 2, InFlight: 2 << 20})
	want := bytes.Repeat([]byte{0xaa}, size)
	chunk := bytes.Repeat([]byte{1}, 3000) // odd sizes, contiguous then not
	for off := int64(0); off < 5<<20; off += int64(len(chunk)) {
		if _, err := w.WriteAt(chunk, off); err != nil {
			t.Fatal(err)
		}
		copy(want[off:], chunk)
	}
	if err := w.ZeroRange(10<<20, 20<<20+512); err != nil {
		t.Fatal(err)
	}
	clear(want[10<<20 : 30<<20+512])
	if _, err := w.WriteAt([]byte("tail"), size-4); err != nil {
		t.Fatal(err)
	}
	copy(want[size-4:], "tail")
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if w.End() != size {
		t.Fatalf("end %d", w.End())
	}
	got, _ := os.ReadFile(p)
	if !bytes.Equal(got, want) {
		t.Fatal("content differs")
	}
}

func TestWriterRefusesPastEnd(t *testing.T) {
	dev, err := Open(tempDisk(t, 1<<20, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	w := NewWriter(context.Background(), dev, WriterOptions{})
	if _, err := w.WriteAt(make([]byte, 10), 1<<20-5); !errors.Is(err, ErrPastEnd) {
		t.Fatalf("got %v", err)
	}
	if err := w.Close(); !errors.Is(err, ErrPastEnd) {
		t.Fatalf("Close: %v", err)
	}
	if err := dev.ZeroRange(context.Background(), 0, 2<<20, nil); !errors.Is(err, ErrPastEnd) {
		t.Fatalf("ZeroRange: %v", err)
	}
}

func TestWriterCancelled(t *testing.T) {
	dev, err := Open(tempDisk(t, 8<<20, 0))
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	ctx, cancel := context.WithCancel(context.Background())
	w := NewWriter(ctx, dev, WriterOptions{BufferSize: 64 << 10, Buffers: 1})
	cancel()
	var werr error
	for off := int64(0); off < 8<<20 && werr == nil; off += 64 << 10 {
		_, werr = w.WriteAt(make([]byte, 64<<10), off)
	}
	if err := w.Close(); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close: %v (write: %v)", err, werr)
	}
}

func TestZeroRangeUnaligned(t *testing.T) {
	p := tempDisk(t, 1<<20, 0xff)
	dev, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	var last int64
	if err := dev.ZeroRange(context.Background(), 100, 5000, func(n int64) { last = n }); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(p)
	want := bytes.Repeat([]byte{0xff}, 1<<20)
	clear(want[100:5100])
	if !bytes.Equal(got, want) || last != 5000 {
		t.Fatalf("zeroed wrong bytes (progress %d)", last)
	}
}
