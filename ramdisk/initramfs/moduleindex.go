package initramfs

import (
	"fmt"
	"strings"

	"castiron/ramdisk/kmod"
)

// archiveIndex is the depmod index the agent coldplugs from, in the kernel's
// formats, cut down to the archive's modules: it matches device modaliases
// against modules.alias and loads each match after what modules.dep and
// modules.softdep say it needs.
type archiveIndex struct {
	alias   string // "alias PATTERN MODULE" lines of archive modules, kernel order
	dep     string // "a.ko: b.ko c.ko" lines, archive (plain) paths, load order
	softdep string // "softdep MODULE pre: ... post: ..." lines of archive modules
}

// archiveIndex builds the index for modules (paths as in modules.dep, in
// load order: Resolution.Modules).
func (db *ModuleDB) archiveIndex(modules []string) archiveIndex {
	inArchive := make(map[string]bool, len(modules))
	for _, m := range modules {
		inArchive[kmod.Name(m)] = true
	}
	var alias, dep, softdep strings.Builder
	for _, a := range db.aliasLines {
		if inArchive[a.module] {
			fmt.Fprintf(&alias, "alias %s %s\n", a.pattern, a.module)
		}
	}
	for _, m := range modules {
		name := kmod.Name(m)
		dep.WriteString(uncompressedModulePath(m) + ":")
		for _, d := range db.deps[name] {
			if inArchive[d] {
				dep.WriteString(" " + uncompressedModulePath(db.paths[d]))
			}
		}
		dep.WriteString("\n")
		for _, line := range db.softdepLines[name] {
			softdep.WriteString(line + "\n")
		}
	}
	return archiveIndex{alias: alias.String(), dep: dep.String(), softdep: softdep.String()}
}
