// Package coldplug loads the kernel modules the machine's devices need, as
// udev does: it reads the modalias of every device in sysfs, matches them
// against the ramdisk's modules.alias and loads each matching module after
// its dependencies, pass after pass until no new device needs a module (a
// loaded bus driver brings new devices: virtio_pci the virtio devices,
// virtio_scsi the SCSI disks that sd_mod wants). Then, on kernel uevents, it
// does the same for devices that appear later (hotplug).
package coldplug

import (
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	"castiron/ramdisk/kmod"
)

// Index files in the module dir, written by the initramfs builder in the
// kernel's formats with paths as in the order file.
const (
	AliasFile   = "modules.alias"
	DepFile     = "modules.dep"
	SoftdepFile = "modules.softdep"
)

// Index is the ramdisk's module database.
type Index struct {
	order []string       // module paths relative to the module dir, load order
	pos   map[string]int // module name -> its place in order
	// complete: modules.alias and modules.dep were there; without them
	// (a ramdisk built before coldplug) every module is loaded.
	complete  bool
	deps      map[string][]string // module -> hard dependencies (names)
	pre, post map[string][]string // module -> softdep words (names or aliases)
	exact     map[string][]string // wildcard-free alias -> modules
	patterns  []aliasPattern      // every alias, file order
}

// ReadIndex reads orderFile (module paths relative to dir, dependencies
// first) and the index files in dir. Only orderFile is required; without
// modules.alias or modules.dep the index is incomplete and Run loads every
// module.
func ReadIndex(orderFile, dir string) (*Index, error) {
	ix := &Index{
		pos:   map[string]int{},
		deps:  map[string][]string{},
		pre:   map[string][]string{},
		post:  map[string][]string{},
		exact: map[string][]string{},
	}
	if err := kmod.EachLine(orderFile, ix.parseOrder); err != nil {
		return nil, err
	}
	ix.complete = true
	for _, f := range []struct {
		name     string
		required bool
		parse    func(string)
	}{
		{AliasFile, true, ix.parseAlias},
		{DepFile, true, ix.parseDep},
		{SoftdepFile, false, ix.parseSoftdep},
	} {
		err := kmod.EachLine(filepath.Join(dir, f.name), f.parse)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if f.required {
				ix.complete = false
			}
		case err != nil:
			return nil, err
		}
	}
	return ix, nil
}

// Complete reports whether the index can drive coldplug.
func (ix *Index) Complete() bool { return ix.complete }

// Len is the number of modules in the ramdisk.
func (ix *Index) Len() int { return len(ix.order) }

func (ix *Index) parseOrder(line string) {
	name := kmod.Name(line)
	if _, dup := ix.pos[name]; dup {
		return
	}
	ix.pos[name] = len(ix.order)
	ix.order = append(ix.order, line)
}

// parseAlias reads "alias PATTERN MODULE"; aliases of modules the ramdisk
// lacks are dropped.
func (ix *Index) parseAlias(line string) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "alias" {
		return
	}
	mod := kmod.Name(f[2])
	if !ix.has(mod) {
		return
	}
	ix.patterns = append(ix.patterns, newAliasPattern(f[1], mod))
	if !strings.ContainsAny(f[1], `*?[\`) {
		ix.exact[f[1]] = append(ix.exact[f[1]], mod)
	}
}

// parseDep reads "a.ko: b.ko c.ko".
func (ix *Index) parseDep(line string) {
	mod, deps, ok := strings.Cut(line, ":")
	if !ok {
		return
	}
	name := kmod.Name(mod)
	for _, d := range strings.Fields(deps) {
		ix.deps[name] = append(ix.deps[name], kmod.Name(d))
	}
}

// parseSoftdep reads "softdep MOD pre: a b post: c"; words before pre: or
// post: are ignored, as kmod does.
func (ix *Index) parseSoftdep(line string) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "softdep" {
		return
	}
	name := kmod.Name(f[1])
	var into map[string][]string
	for _, w := range f[2:] {
		switch w {
		case "pre:":
			into = ix.pre
		case "post:":
			into = ix.post
		default:
			if into != nil {
				into[name] = append(into[name], w)
			}
		}
	}
}

// Match returns the modules with an alias matching a device's modalias,
// each once, in modules.alias order.
func (ix *Index) Match(modalias string) []string {
	var mods []string
	for _, p := range ix.patterns {
		if !slices.Contains(mods, p.module) && p.match(modalias) {
			mods = append(mods, p.module)
		}
	}
	return mods
}

// loadOrder returns the modules in the ramdisk that names need, names
// included: hard and soft dependencies, transitively, in modules.order
// order (which puts dependencies and softdep "pre:" modules first).
func (ix *Index) loadOrder(names []string) []string {
	seen := map[string]bool{}
	var visit func(string)
	visit = func(name string) {
		if !ix.has(name) || seen[name] {
			return
		}
		seen[name] = true
		for _, d := range ix.deps[name] {
			visit(d)
		}
		for _, w := range append(slices.Clone(ix.pre[name]), ix.post[name]...) {
			for _, m := range ix.softdepModules(w) {
				visit(m)
			}
		}
	}
	for _, n := range names {
		visit(n)
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	slices.SortFunc(out, func(a, b string) int { return ix.pos[a] - ix.pos[b] })
	return out
}

// softdepModules resolves a softdep word: a module name, else an exact
// alias standing for modules (all of them, as modprobe does).
func (ix *Index) softdepModules(word string) []string {
	if name := kmod.Name(word); ix.has(name) {
		return []string{name}
	}
	return ix.exact[word]
}

// standalone returns the modules nothing pulls in: no other module needs
// them and no device alias can match them (efivarfs: "fs-efivarfs"; loop:
// "block-major-7-*"). The builder included them for their own sake, so
// they are always loaded.
func (ix *Index) standalone() []string {
	needed := map[string]bool{}
	for _, rel := range ix.order {
		name := kmod.Name(rel)
		for _, m := range ix.loadOrder([]string{name}) {
			if m != name {
				needed[m] = true
			}
		}
	}
	hasDeviceAlias := map[string]bool{}
	for _, p := range ix.patterns {
		if isDeviceAlias(p.pattern) {
			hasDeviceAlias[p.module] = true
		}
	}
	var out []string
	for _, rel := range ix.order {
		if name := kmod.Name(rel); !needed[name] && !hasDeviceAlias[name] {
			out = append(out, name)
		}
	}
	return out
}

// isDeviceAlias tells a device alias ("pci:v...", "virtio:d...",
// "acpi*:PNP0A03:*") from the other kinds the kernel writes ("fs-ext4",
// "char-major-10-237", "crypto-crc32c", "devname:loop-control"): only
// device modaliases have a "bus:" prefix, and devname: names a /dev node.
func isDeviceAlias(pattern string) bool {
	return strings.Contains(pattern, ":") && !strings.HasPrefix(pattern, "devname:")
}

func (ix *Index) has(name string) bool {
	_, ok := ix.pos[name]
	return ok
}

// path returns a module's path relative to the module dir.
func (ix *Index) path(name string) string { return ix.order[ix.pos[name]] }
