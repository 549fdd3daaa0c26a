package iso

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
)

// Cache keeps one ISO per name (a node UUID) in a directory and rebuilds it
// only when its inputs change: the kernel command line, the overlay and
// extra files, and the size and modification time of every input file (a
// new `make ramdisk` writes new files). The file name carries a digest of
// the inputs, "<name>-<digest>.iso", so a URL handed to a BMC keeps naming
// the same bytes while a newer ISO is built under another name.
type Cache struct {
	dir string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// NewCache uses dir (created when missing) for the ISOs.
func NewCache(dir string) *Cache {
	return &Cache{dir: dir, locks: map[string]*sync.Mutex{}}
}

// Dir is where the ISOs are.
func (c *Cache) Dir() string { return c.dir }

var validName = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$`) })

// Ensure returns the file name (in Dir) of name's ISO for spec, building it
// first when no ISO for these inputs exists; then older ISOs of name are
// removed. built is nil when the cached ISO was used. Concurrent calls for
// one name wait for each other.
func (c *Cache) Ensure(ctx context.Context, name string, spec Spec) (file string, built *Result, err error) {
	if !validName().MatchString(name) {
		return "", nil, fmt.Errorf("iso: cache name %q", name)
	}
	key, err := spec.Key()
	if err != nil {
		return "", nil, err
	}
	file = name + "-" + key[:16] + ".iso"
	lock := c.lock(name)
	lock.Lock()
	defer lock.Unlock()
	dst := filepath.Join(c.dir, file)
	if st, err := os.Stat(dst); err == nil && st.Mode().IsRegular() {
		return file, nil, nil
	}
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return "", nil, fmt.Errorf("iso: %w", err)
	}
	res, err := Build(ctx, spec, dst)
	if err != nil {
		return "", nil, err
	}
	c.removeOthers(name, file)
	return file, &res, nil
}

// Remove deletes every ISO of name.
func (c *Cache) Remove(name string) error {
	if !validName().MatchString(name) {
		return fmt.Errorf("iso: cache name %q", name)
	}
	lock := c.lock(name)
	lock.Lock()
	defer lock.Unlock()
	return c.removeOthers(name, "")
}

func (c *Cache) removeOthers(name, keep string) error {
	matches, err := filepath.Glob(filepath.Join(c.dir, name+"-*.iso"))
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range matches {
		base := filepath.Base(m)
		// "<name>-<16 hex>.iso" only: another name may start with this one.
		if base == keep || len(base) != len(name)+1+16+4 {
			continue
		}
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *Cache) lock(name string) *sync.Mutex {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.locks[name]
	if !ok {
		l = &sync.Mutex{}
		c.locks[name] = l
	}
	return l
}

// Key is a digest of everything the ISO is made of.
func (s Spec) Key() (string, error) {
	h := sha256.New()
	put := func(parts ...string) {
		for _, p := range parts {
			fmt.Fprintf(h, "%d:%s;", len(p), p)
		}
	}
	for _, p := range []string{s.Kernel, s.Initramfs, s.Loaders.ISOLinux, s.Loaders.LDLinux, s.Loaders.GRUBEFI} {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("iso: %w", err)
		}
		put(p, fmt.Sprint(st.Size()), fmt.Sprint(st.ModTime().UnixNano()))
	}
	put("args", strings.Join(s.Args, "\x00"))
	for _, name := range sortedKeys(s.Overlay) {
		put("overlay", name, string(s.Overlay[name]))
	}
	for _, name := range sortedKeys(s.Files) {
		put("file", name, string(s.Files[name]))
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
