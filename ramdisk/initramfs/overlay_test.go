package initramfs

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/u-root/u-root/pkg/cpio"
)

func TestWriteOverlay(t *testing.T) {
	files := map[string][]byte{
		"etc/castiron/network_data.json": []byte(`{"links":[]}`),
		"/etc/castiron/other":            []byte("x"),
	}
	var a, b bytes.Buffer
	if err := WriteOverlay(context.Background(), &a, files); err != nil {
		t.Fatal(err)
	}
	if err := WriteOverlay(context.Background(), &b, files); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("two overlays of the same files differ")
	}
	if !bytes.HasPrefix(a.Bytes(), []byte("070701")) {
		t.Fatalf("not an uncompressed newc archive: % x", a.Bytes()[:8])
	}
	got := map[string]string{}
	modes := map[string]uint64{}
	r := cpio.Newc.Reader(bytes.NewReader(a.Bytes()))
	for {
		rec, err := r.ReadRecord()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		modes[rec.Name] = rec.Mode
		if rec.Mode&cpio.S_IFMT == cpio.S_IFREG {
			data, _ := io.ReadAll(io.NewSectionReader(rec.ReaderAt, 0, int64(rec.FileSize)))
			got[rec.Name] = string(data)
		}
	}
	if got["etc/castiron/network_data.json"] != `{"links":[]}` || got["etc/castiron/other"] != "x" {
		t.Errorf("files: %v", got)
	}
	for _, dir := range []string{"etc", "etc/castiron"} {
		if modes[dir]&cpio.S_IFMT != cpio.S_IFDIR {
			t.Errorf("%s: mode %o, want a directory (the kernel does not create parents)", dir, modes[dir])
		}
	}
}
