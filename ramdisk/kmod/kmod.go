// Package kmod reads the depmod files (modules.order, modules.dep,
// modules.alias, modules.softdep) that both the initramfs builder and the
// agent's module loader use. No dependencies, so the agent stays small.
package kmod

import (
	"bufio"
	"fmt"
	"os"
	"path"
	"strings"
)

// Name is a module's name from its path: base name without ".ko*", with
// '-' as '_' (how the kernel and modprobe name modules).
func Name(p string) string {
	name := path.Base(p)
	if i := strings.Index(name, ".ko"); i >= 0 {
		name = name[:i]
	}
	return strings.ReplaceAll(name, "-", "_")
}

// EachLine calls fn for every non-empty, non-comment line of file, trimmed.
func EachLine(file string, fn func(string)) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024) // modules.dep lines can be long
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line != "" && !strings.HasPrefix(line, "#") {
			fn(line)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	return nil
}
