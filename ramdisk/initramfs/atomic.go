package initramfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// writeAtomic creates dst with the bytes fill writes, through a temporary
// file in the same directory renamed over dst, so a reader (castiron's HTTP
// boot serving the previous build) sees the old file or the new one, never
// half of one. It returns the size written.
func writeAtomic(ctx context.Context, dst string, perm os.FileMode, fill func(w io.Writer) error) (size int64, err error) {
	dir := filepath.Dir(dst)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(dst)+".tmp-*")
	if err != nil {
		return 0, err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	cw := &countingWriter{w: tmp}
	if err := fill(cw); err != nil {
		return 0, err
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if err := tmp.Chmod(perm); err != nil {
		return 0, err
	}
	if err := tmp.Sync(); err != nil {
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), dst); err != nil {
		return 0, err
	}
	// Make the rename itself durable.
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return cw.n, nil
}

// copyFileAtomic copies src to dst with writeAtomic.
func copyFileAtomic(ctx context.Context, src, dst string, perm os.FileMode) (int64, error) {
	in, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer in.Close()
	return writeAtomic(ctx, dst, perm, func(w io.Writer) error {
		if _, err := io.Copy(w, ctxReader{ctx, in}); err != nil {
			return fmt.Errorf("copy %s: %w", src, err)
		}
		return nil
	})
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
