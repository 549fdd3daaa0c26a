// Command mkimage builds castiron's OCI image without a container daemon,
// with github.com/google/go-containerregistry: one layer on an empty base
// (the binary is static), run as a non-root user. make image runs it.
//
// It writes the image twice: -tar, an archive `docker load` and `podman load`
// read, and -layout, an OCI image layout directory (skopeo copy oci:DIR ...,
// crane push --index).
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The image's user: not root, the uid distroless calls nonroot.
const (
	uid     = 65532
	dataDir = "/var/lib/castiron"
)

type options struct {
	binary, config, ipxeDir, caFile string
	version, arch, repo             string
	tarPath, layoutDir              string
	created                         time.Time
}

func main() {
	var o options
	flag.StringVar(&o.binary, "binary", "build/pkg/castiron", "static castiron binary for -arch")
	flag.StringVar(&o.config, "config", "build/pkg/castiron.yaml", "default /etc/castiron/castiron.yaml")
	flag.StringVar(&o.ipxeDir, "ipxe-dir", "/usr/lib/ipxe", "iPXE binaries to copy to /usr/lib/ipxe (Debian package ipxe); empty: none")
	flag.StringVar(&o.caFile, "ca-file", "/etc/ssl/certs/ca-certificates.crt", "CA bundle for TLS to BMCs and PostgreSQL; empty: none")
	flag.StringVar(&o.version, "version", "dev", "image version (tag and org.opencontainers.image.version)")
	flag.StringVar(&o.arch, "arch", runtime.GOARCH, "GOARCH of -binary")
	flag.StringVar(&o.repo, "repo", "castiron", "repository name in the tag")
	flag.StringVar(&o.tarPath, "tar", "build/castiron-image.tar", "image archive (docker/podman load)")
	flag.StringVar(&o.layoutDir, "layout", "build/castiron-oci", "OCI image layout directory")
	flag.Parse()
	o.created = time.Now().UTC()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fail(fmt.Errorf("SOURCE_DATE_EPOCH=%q: %w", s, err))
		}
		o.created = time.Unix(sec, 0).UTC()
	}
	if err := build(o); err != nil {
		fail(err)
	}
	fmt.Println(o.tarPath)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "mkimage:", err)
	os.Exit(1)
}

// badTag is what a tag may not hold ([A-Za-z0-9_.-], 128 at most).
var badTag = regexp.MustCompile(`[^A-Za-z0-9_.-]`)

func build(o options) error {
	files, err := rootFiles(o)
	if err != nil {
		return err
	}
	layer, err := tarLayer(files, o.created)
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return err
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", o.arch
	cf.Created = v1.Time{Time: o.created}
	cf.Config = v1.Config{
		Entrypoint: []string{"/usr/bin/castiron"},
		Cmd:        []string{"serve"},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir: dataDir,
		// The same defaults as the Debian package; CASTIRON_* variables
		// (docker run -e) win over the file.
		Env: []string{
			"PATH=/usr/bin",
			"CASTIRON_CONFIG=/etc/castiron/castiron.yaml",
		},
		ExposedPorts: map[string]struct{}{"6385/tcp": {}, "67/udp": {}, "69/udp": {}, "547/udp": {}},
		Volumes:      map[string]struct{}{dataDir: {}},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "castiron",
			"org.opencontainers.image.description": "bare-metal provisioning appliance speaking OpenStack Ironic's API",
			"org.opencontainers.image.version":     o.version,
		},
	}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}

	tag, err := name.NewTag(o.repo + ":" + badTag.ReplaceAllString(o.version, "_"))
	if err != nil {
		return err
	}
	if err := writeTar(o.tarPath, tag, img); err != nil {
		return err
	}
	if err := os.RemoveAll(o.layoutDir); err != nil {
		return err
	}
	p, err := layout.Write(o.layoutDir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": tag.TagStr(),
	}))
}

// writeTar writes the archive next to its place and renames it there, so a
// failed build leaves no half archive.
func writeTar(path string, tag name.Tag, img v1.Image) error {
	tmp := path + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}
