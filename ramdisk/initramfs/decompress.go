package initramfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// moduleSuffixes are the compressed module formats kmod knows; the kernel's
// finit_module only takes them when built with in-kernel decompression, so
// the archive always holds plain .ko files.
var moduleSuffixes = []string{".xz", ".zst", ".gz"}

// uncompressedModulePath drops a compression suffix: "a.ko.xz" -> "a.ko".
func uncompressedModulePath(p string) string {
	for _, s := range moduleSuffixes {
		if strings.HasSuffix(p, s) {
			return strings.TrimSuffix(p, s)
		}
	}
	return p
}

// readModule returns the plain contents of the module file at path.
func readModule(ctx context.Context, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var r io.Reader = ctxReader{ctx, f}
	switch {
	case strings.HasSuffix(path, ".xz"):
		xr, err := xz.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		r = xr
	case strings.HasSuffix(path, ".zst"):
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	case strings.HasSuffix(path, ".gz"):
		gr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		defer gr.Close()
		r = gr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return b, nil
}

// ctxReader stops a long copy when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
