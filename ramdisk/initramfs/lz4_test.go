package initramfs

import (
	"bytes"
	"encoding/binary"
	"math/rand/v2"
	"os/exec"
	"testing"

	"github.com/pierrec/lz4/v4"
)

// unlz4 decodes a legacy lz4 stream the way the kernel's lib/decompress_unlz4.c
// does for an initramfs held in memory: a chunk length is taken as it is
// (no flag bits) and each chunk must be one valid block of at most 8 MiB.
func unlz4(t *testing.T, raw []byte) (out []byte, end int) {
	t.Helper()
	if len(raw) < 4 || binary.LittleEndian.Uint32(raw) != lz4LegacyMagic {
		t.Fatalf("no legacy lz4 magic: % x", raw[:min(4, len(raw))])
	}
	chunk := make([]byte, lz4LegacyChunk)
	for pos := 4; ; {
		if len(raw)-pos < 4 {
			t.Fatal("stream ends without a zero chunk length")
		}
		size := int(binary.LittleEndian.Uint32(raw[pos:]))
		pos += 4
		if size == 0 {
			return out, pos - 4
		}
		if size > len(raw)-pos {
			t.Fatalf("chunk length %#x at %d runs past the end (%d bytes): the kernel says \"Decoding failed\"", size, pos-4, len(raw))
		}
		n, err := lz4.UncompressBlock(raw[pos:pos+size], chunk)
		if err != nil {
			t.Fatalf("chunk at %d: %v", pos-4, err)
		}
		out = append(out, chunk[:n]...)
		pos += size
	}
}

// TestLZ4LegacyKernelReadable: incompressible input (an image holding
// compressed files), compressible input, a tail shorter than lz4's
// minimum match, and nothing at all all come out as chunks the kernel
// decodes, padded to 4 bytes.
func TestLZ4LegacyKernelReadable(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 9<<20)
	for i := range random {
		random[i] = byte(rng.Uint32())
	}
	text := bytes.Repeat([]byte("castiron initramfs 0123456789\n"), 600_000)
	cases := map[string][]byte{
		"random":       random,
		"text":         text,
		"text+3":       append(append([]byte{}, text[:lz4LegacyChunk]...), 1, 2, 3),
		"random chunk": append(append([]byte{}, random[:lz4LegacyChunk]...), text[:1000]...),
		"empty":        nil,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			zw, err := newCompressor(&buf, LZ4)
			if err != nil {
				t.Fatal(err)
			}
			// Odd write sizes cross the chunk boundary mid-write.
			for rest := in; len(rest) > 0; {
				k := min(len(rest), 3_000_001)
				if _, err := zw.Write(rest[:k]); err != nil {
					t.Fatal(err)
				}
				rest = rest[k:]
			}
			if err := zw.Close(); err != nil {
				t.Fatal(err)
			}
			if buf.Len()%4 != 0 {
				t.Errorf("stream of %d bytes is not padded to 4", buf.Len())
			}
			got, end := unlz4(t, buf.Bytes())
			if !bytes.Equal(got, in) {
				t.Fatalf("decoded %d bytes, want %d equal ones", len(got), len(in))
			}
			// lz4(1) reads it too, when installed (`lz4 -l` writes this
			// format); it takes the end mark for a broken next frame.
			if tool, err := exec.LookPath("lz4"); err == nil && len(in) > 0 {
				cmd := exec.Command(tool, "-d", "-c")
				cmd.Stdin = bytes.NewReader(buf.Bytes()[:end])
				got, err := cmd.Output()
				if err != nil || !bytes.Equal(got, in) {
					t.Fatalf("lz4 -d: %v, %d bytes, want %d equal ones", err, len(got), len(in))
				}
			}
		})
	}
}
