package initramfs

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"

	"castiron/ramdisk/kmod"
)

// ModuleDB is what depmod wrote for one kernel: modules.dep (hard
// dependencies), modules.builtin, modules.softdep and modules.alias (to
// resolve the soft dependencies, e.g. crc_t10dif wants "crct10dif").
type ModuleDB struct {
	paths   map[string]string   // module name -> path relative to the kernel's module dir
	deps    map[string][]string // module name -> dependency names, as modules.dep lists them
	builtin map[string]bool
	pre     map[string][]string // softdep "pre:" names (modules or aliases)
	post    map[string][]string
	aliases map[string][]string // exact (wildcard-free) alias -> module names

	// The lines an archive's own index is filtered from (archiveIndex), in
	// the kernel's order.
	aliasLines   []aliasLine
	softdepLines map[string][]string // module name -> its "softdep ..." lines
}

// aliasLine is one "alias PATTERN MODULE" of modules.alias.
type aliasLine struct{ pattern, module string }

// Resolution is a module set in load order.
type Resolution struct {
	// Modules: paths relative to the kernel's module dir (as in modules.dep,
	// still compressed if they are), dependencies before their users.
	Modules []string
	Builtin []string // requested but compiled in
	Missing []string // requested but unknown to this kernel
}

// LoadModuleDB reads the depmod files of one kernel's module dir. Only
// modules.dep is required.
func LoadModuleDB(ctx context.Context, dir string) (*ModuleDB, error) {
	db := &ModuleDB{
		paths:   map[string]string{},
		deps:    map[string][]string{},
		builtin: map[string]bool{},
		pre:     map[string][]string{},
		post:    map[string][]string{},
		aliases: map[string][]string{},

		softdepLines: map[string][]string{},
	}
	files := []struct {
		name     string
		required bool
		parse    func(line string)
	}{
		{"modules.dep", true, db.parseDep},
		{"modules.builtin", false, db.parseBuiltin},
		{"modules.softdep", false, db.parseSoftdep},
		{"modules.alias", false, db.parseAlias},
	}
	for _, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		err := kmod.EachLine(filepath.Join(dir, f.name), f.parse)
		if errors.Is(err, fs.ErrNotExist) && !f.required {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("module database: %w", err)
		}
	}
	return db, nil
}

// parseDep reads "kernel/a.ko: kernel/b.ko kernel/c.ko".
func (db *ModuleDB) parseDep(line string) {
	modPath, deps, ok := strings.Cut(line, ":")
	if !ok {
		return
	}
	name := kmod.Name(modPath)
	db.paths[name] = modPath
	for _, d := range strings.Fields(deps) {
		db.deps[name] = append(db.deps[name], kmod.Name(d))
	}
}

func (db *ModuleDB) parseBuiltin(line string) { db.builtin[kmod.Name(line)] = true }

// parseSoftdep reads "softdep MOD pre: a b post: c"; words before pre:/post:
// are ignored, as kmod does.
func (db *ModuleDB) parseSoftdep(line string) {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "softdep" {
		return
	}
	name := kmod.Name(f[1])
	db.softdepLines[name] = append(db.softdepLines[name], line)
	var into map[string][]string
	for _, w := range f[2:] {
		switch w {
		case "pre:":
			into = db.pre
		case "post:":
			into = db.post
		default:
			if into != nil {
				into[name] = append(into[name], w)
			}
		}
	}
}

// parseAlias keeps every "alias PATTERN MODULE" line for the archive's
// index, and indexes those without wildcards as names: softdeps name
// algorithms ("crct10dif"), never device patterns.
func (db *ModuleDB) parseAlias(line string) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "alias" {
		return
	}
	db.aliasLines = append(db.aliasLines, aliasLine{pattern: f[1], module: kmod.Name(f[2])})
	if strings.ContainsAny(f[1], "*?[") {
		return
	}
	db.aliases[f[1]] = append(db.aliases[f[1]], kmod.Name(f[2]))
}

// Resolve returns the modules to load for names (module names or exact
// aliases), each after its dependencies and soft "pre:" dependencies, each
// once. Built-in and unknown names are reported, not errors.
func (db *ModuleDB) Resolve(names []string) Resolution {
	r := &resolver{db: db, seen: map[string]bool{}}
	var res Resolution
	for _, n := range names {
		switch name := kmod.Name(n); {
		case db.paths[name] != "":
			r.visit(name)
		case db.builtin[name]:
			res.Builtin = appendOnce(res.Builtin, name)
		case len(db.aliases[n]) > 0:
			for _, m := range db.aliases[n] {
				r.visit(m)
			}
		default:
			res.Missing = appendOnce(res.Missing, n)
		}
	}
	res.Modules = r.order
	return res
}

type resolver struct {
	db    *ModuleDB
	seen  map[string]bool
	order []string
}

// visit appends name after everything it needs. modules.dep is acyclic;
// softdeps could loop, and seen (set before recursing) stops that.
func (r *resolver) visit(name string) {
	p := r.db.paths[name]
	if p == "" || r.seen[name] {
		return
	}
	r.seen[name] = true
	r.visitSoft(r.db.pre[name])
	// modules.dep lists a module's whole dependency closure, users before
	// what they use; visiting each recursively orders them correctly.
	for _, d := range r.db.deps[name] {
		r.visit(d)
	}
	r.order = append(r.order, p)
	r.visitSoft(r.db.post[name])
}

// visitSoft loads soft dependencies: a module name, or an alias standing for
// modules (all of them, as modprobe does). Unknown or built-in: nothing to do.
func (r *resolver) visitSoft(names []string) {
	for _, n := range names {
		if m := kmod.Name(n); r.db.paths[m] != "" {
			r.visit(m)
			continue
		}
		mods := append([]string(nil), r.db.aliases[n]...)
		sort.Strings(mods) // modules.alias order is depmod's; keep ours stable
		for _, m := range mods {
			r.visit(m)
		}
	}
}

func appendOnce(list []string, s string) []string {
	for _, have := range list {
		if have == s {
			return list
		}
	}
	return append(list, s)
}
