package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// entry is one file or directory of the image's root file system.
type entry struct {
	path     string // without the leading /
	mode     int64  // permission bits; dir when data is nil and dir is set
	dir      bool
	uid, gid int
	data     []byte
}

// rootFiles lists the root file system: the binary, its configuration, the
// account it runs as, the data dir, /tmp, and what the build host has of
// the CA bundle and iPXE.
func rootFiles(o options) ([]entry, error) {
	bin, err := os.ReadFile(o.binary)
	if err != nil {
		return nil, err
	}
	conf, err := os.ReadFile(o.config)
	if err != nil {
		return nil, err
	}
	files := []entry{
		{path: "etc", mode: 0o755, dir: true},
		{path: "etc/passwd", mode: 0o644, data: fmt.Appendf(nil,
			"root:x:0:0:root:/root:/sbin/nologin\ncastiron:x:%d:%d:castiron:%s:/sbin/nologin\n", uid, uid, dataDir)},
		{path: "etc/group", mode: 0o644, data: fmt.Appendf(nil, "root:x:0:\ncastiron:x:%d:\n", uid)},
		{path: "etc/castiron", mode: 0o755, dir: true},
		{path: "etc/castiron/castiron.yaml", mode: 0o644, data: conf},
		{path: "tmp", mode: 0o1777, dir: true},
		{path: "usr", mode: 0o755, dir: true},
		{path: "usr/bin", mode: 0o755, dir: true},
		{path: "usr/bin/castiron", mode: 0o755, data: bin},
		{path: "usr/lib", mode: 0o755, dir: true},
		{path: "var", mode: 0o755, dir: true},
		{path: "var/lib", mode: 0o755, dir: true},
		{path: dataDir[1:], mode: 0o750, dir: true, uid: uid, gid: uid},
	}
	if o.caFile != "" {
		ca, err := os.ReadFile(o.caFile)
		if err != nil {
			return nil, fmt.Errorf("CA bundle (-ca-file \"\" for none): %w", err)
		}
		files = append(files,
			entry{path: "etc/ssl", mode: 0o755, dir: true},
			entry{path: "etc/ssl/certs", mode: 0o755, dir: true},
			entry{path: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: ca})
	}
	if o.ipxeDir != "" {
		files = append(files, entry{path: "usr/lib/ipxe", mode: 0o755, dir: true})
		// The boot files castiron's DHCP names (pxe/dhcp defaults).
		for _, f := range []string{"undionly.kpxe", "snponly.efi", "ipxe.efi"} {
			b, err := os.ReadFile(filepath.Join(o.ipxeDir, f)) // follows Debian's symlinks
			if err != nil {
				return nil, fmt.Errorf("iPXE (Debian package ipxe; -ipxe-dir \"\" for none): %w", err)
			}
			files = append(files, entry{path: "usr/lib/ipxe/" + f, mode: 0o644, data: b})
		}
	}
	return files, nil
}

// tarLayer is the files as one gzip-compressed OCI layer, every time
// stamped with mtime so that the same inputs give the same digest.
func tarLayer(files []entry, mtime time.Time) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name: f.path, Mode: f.mode, Uid: f.uid, Gid: f.gid,
			ModTime: mtime, Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(f.data)),
		}
		if f.dir {
			h.Name += "/"
			h.Typeflag, h.Size = tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.BestCompression))
}
