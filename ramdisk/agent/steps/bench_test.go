package steps

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"castiron/ramdisk/protocol"
	"castiron/ramdisk/trust/trusttest"
)

// BenchmarkWriteImage measures write_image from an httptest server to a
// file and, as root, a loop device, next to `curl | dd` doing the same raw
// copy, and write_image of the raw image over HTTPS from a server castiron's
// CA vouches for (the agent with a CA: TLS's cost), in the same run:
//
//	go test -run '^$' -bench WriteImage -benchtime 3x ./ramdisk/agent/steps/
//
// The image is 256 MiB: half random data, a quarter patterned, a quarter
// zeros (holes in the qcow2).
func BenchmarkWriteImage(b *testing.B) {
	need(b, false, "qemu-img", "curl", "dd")
	dir := b.TempDir()
	const size = 256 << 20
	raw := filepath.Join(dir, "image.raw")
	buf := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for off := 0; off < size; off += 4 << 20 {
		switch (off >> 22) % 4 {
		case 0, 1:
			for i := off; i < off+4<<20; i += 8 {
				v := rng.Uint64()
				for j := 0; j < 8; j++ {
					buf[i+j] = byte(v >> (8 * j))
				}
			}
		case 2:
			for i := off; i < off+4<<20; i++ {
				buf[i] = byte(i >> 9)
			}
		}
	}
	if err := os.WriteFile(raw, buf, 0o644); err != nil {
		b.Fatal(err)
	}
	sh(b, "qemu-img", "convert", "-O", "qcow2", raw, filepath.Join(dir, "image.qcow2"))
	sh(b, "sh", "-c", "zstd -q -c "+raw+" > "+raw+".zst")
	srv := imageServer(b, dir)
	tlsSrv, tlsCfg := trusttest.Server(b, http.FileServer(http.Dir(dir)))
	file := filepath.Join(b.TempDir(), "disk.img")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(file, size+(64<<20)); err != nil {
		b.Fatal(err)
	}
	targets := map[string]string{"file": file}
	if os.Geteuid() == 0 {
		if _, err := exec.LookPath("losetup"); err == nil {
			targets["loop"] = loopDevice(b, size+(64<<20), 0)
		}
	}
	for _, kind := range []string{"file", "loop"} {
		target, ok := targets[kind]
		if !ok {
			continue
		}
		inv := inventoryOf(target)
		for _, img := range []string{"image.raw", "image.qcow2", "image.raw.zst"} {
			b.Run(kind+"/castiron/"+img, func(b *testing.B) {
				b.SetBytes(size)
				for b.Loop() {
					_, err := runStep(b, context.Background(), testRunner(), protocol.StepWriteImage, map[string]any{
						protocol.ArgImageURL: srv.URL + "/" + img, protocol.ArgRootDevice: map[string]any{"name": target},
					}, inv, nil)
					if err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		b.Run(kind+"/castiron-https/image.raw", func(b *testing.B) {
			b.SetBytes(size)
			r := testRunner()
			r.fetch.TLS = tlsCfg
			for b.Loop() {
				_, err := runStep(b, context.Background(), r, protocol.StepWriteImage, map[string]any{
					protocol.ArgImageURL: tlsSrv.URL + "/image.raw", protocol.ArgRootDevice: map[string]any{"name": target},
				}, inv, nil)
				if err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind+"/curl|dd/image.raw", func(b *testing.B) {
			b.SetBytes(size)
			for b.Loop() {
				cmd := exec.Command("sh", "-c", fmt.Sprintf("curl -s %s/image.raw | dd of=%s bs=4M iflag=fullblock conv=notrunc,fsync status=none", srv.URL, target))
				if out, err := cmd.CombinedOutput(); err != nil {
					b.Fatalf("%v %s", err, out)
				}
			}
		})
	}
}
