package qcow2

import (
	"bytes"
	"context"
	"errors"
	"testing"
)

// FuzzParseHeader: any bytes give a header that keeps the limits, or an
// error, never a panic.
func FuzzParseHeader(f *testing.F) {
	f.Add([]byte(Magic + "\x00\x00\x00\x03"))
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := ParseHeader(b)
		if err != nil {
			return
		}
		if h.ClusterBits < minClusterBits || h.ClusterBits > maxClusterBits || h.VirtualSize >= maxVirtualSize ||
			int64(h.L1Size) < h.l1Needed() || h.BackingFileOffset != 0 || h.CryptMethod != 0 {
			t.Fatalf("accepted header breaks the limits: %+v", h)
		}
	})
}

// FuzzConvert: any stream converts or fails cleanly; a conversion that
// succeeds defines every byte of the virtual disk exactly once and never
// writes outside it.
func FuzzConvert(f *testing.F) {
	f.Add([]byte(Magic))
	errTooBig := errors.New("too big for the fuzz target")
	f.Fuzz(func(t *testing.T, b []byte) {
		var dst *strictTarget
		st, err := Convert(context.Background(), bytes.NewReader(b), targetFunc(func() Target { return dst }), Options{
			MaxBuffered: 1 << 20,
			CheckHeader: func(h Header) error {
				if h.VirtualSize > 8<<20 {
					return errTooBig
				}
				dst = &strictTarget{seen: make([]byte, h.VirtualSize)}
				return nil
			},
		})
		if err != nil {
			return
		}
		for i, s := range dst.seen {
			if s != 1 {
				t.Fatalf("byte %d defined %d times (stats %+v)", i, s, st)
			}
		}
	})
}

// strictTarget counts how often each byte is written or zeroed.
type strictTarget struct{ seen []byte }

func (s *strictTarget) mark(off, n int64) error {
	if off < 0 || n < 0 || off+n > int64(len(s.seen)) {
		return errors.New("outside the virtual disk")
	}
	for i := off; i < off+n; i++ {
		s.seen[i]++
	}
	return nil
}

func (s *strictTarget) WriteAt(p []byte, off int64) (int, error) {
	return len(p), s.mark(off, int64(len(p)))
}

func (s *strictTarget) ZeroRange(off, n int64) error { return s.mark(off, n) }

// targetFunc defers choosing the target until the header is read (the
// header check runs before any write).
type targetFunc func() Target

func (f targetFunc) WriteAt(p []byte, off int64) (int, error) {
	return f().WriteAt(p, off)
}

func (f targetFunc) ZeroRange(off, n int64) error {
	return f().ZeroRange(off, n)
}
