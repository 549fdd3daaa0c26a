// Command mkdeb builds castiron's Debian package from packaging/nfpm.yaml
// with github.com/goreleaser/nfpm/v2 (only its deb packager: the nfpm
// command also links rpm and msix packagers whose modules the module proxy
// here does not serve). make deb runs it from the repository's root.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/goreleaser/nfpm/v2"
	_ "github.com/goreleaser/nfpm/v2/deb" // registers the "deb" packager
)

func main() {
	config := flag.String("config", "packaging/nfpm.yaml", "nfpm configuration")
	outDir := flag.String("out", "build", "directory the .deb is written to")
	flag.Parse()
	path, err := build(*config, *outDir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mkdeb:", err)
		os.Exit(1)
	}
	fmt.Println(path)
}

// build writes the package under its conventional name
// (castiron_VERSION_ARCH.deb) and returns its path.
func build(configPath, outDir string) (string, error) {
	config, err := nfpm.ParseFile(configPath) // expands ${VAR} from the environment
	if err != nil {
		return "", err
	}
	info, err := config.Get("deb")
	if err != nil {
		return "", err
	}
	info = nfpm.WithDefaults(info) // mtime from SOURCE_DATE_EPOCH
	pkg, err := nfpm.Get("deb")
	if err != nil {
		return "", err
	}
	target := filepath.Join(outDir, pkg.ConventionalFileName(info))
	tmp := target + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return "", err
	}
	info.Target = target
	if err := pkg.Package(info, f); err != nil {
		f.Close()
		os.Remove(tmp)
		return "", err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return target, os.Rename(tmp, target)
}
