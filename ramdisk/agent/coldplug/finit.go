package coldplug

import (
	"context"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// FinitLoader loads plain (uncompressed) .ko files from Dir with
// finit_module(2).
type FinitLoader struct{ Dir string }

func (l FinitLoader) Load(_ context.Context, relPath string) error {
	f, err := os.Open(filepath.Join(l.Dir, relPath))
	if err != nil {
		return err
	}
	defer f.Close()
	return unix.FinitModule(int(f.Fd()), "", 0)
}
