package initramfs

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CreateAtomic creates dst with what fill writes into f, a temporary file in
// the same directory renamed over dst once fill succeeded, so a reader
// (castiron serving the previous build over HTTP) sees the old file or the
// new one, never half of one. fill may write anywhere in f (WriteAt). It
// returns the size of the file.
func CreateAtomic(ctx context.Context, dst string, perm os.FileMode, fill func(f *os.File) error) (size int64, err error) {
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
	if err := fill(tmp); err != nil {
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
	st, err := tmp.Stat()
	if err != nil {
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
	return st.Size(), nil
}

// writeAtomic is CreateAtomic for a sequential writer.
func writeAtomic(ctx context.Context, dst string, perm os.FileMode, fill func(w io.Writer) error) (int64, error) {
	return CreateAtomic(ctx, dst, perm, func(f *os.File) error { return fill(f) })
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
