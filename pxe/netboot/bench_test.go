package netboot

import (
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkDownload fetches kernel (8 MB) + initramfs (24 MB) over loopback
// through the handler, and through a plain http.FileServer on the same
// files as the baseline; MB/s is the ns/op-derived throughput.
func BenchmarkDownload(b *testing.B) {
	const kernelSize, initrdSize = 8 << 20, 24 << 20
	dir := b.TempDir()
	kPath, iPath := filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "initramfs")
	os.WriteFile(kPath, randomBytes(b, kernelSize), 0o644)
	os.WriteFile(iPath, randomBytes(b, initrdSize), 0o644)

	ours := httptest.NewServer(New(Config{
		KernelPath: kPath, InitramfsPath: iPath, Gate: testGate,
		Recorder: &events{}, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}))
	defer ours.Close()
	plain := httptest.NewServer(http.StripPrefix("/boot/", http.FileServer(http.Dir(dir))))
	defer plain.Close()

	for _, s := range []struct {
		name string
		base string
	}{{"netboot", ours.URL}, {"http.FileServer", plain.URL}} {
		b.Run(s.name, func(b *testing.B) {
			b.SetBytes(kernelSize + initrdSize)
			client := &http.Client{}
			for b.Loop() {
				for _, p := range []string{"/boot/vmlinuz?mac=" + macInspect, "/boot/initramfs?mac=" + macInspect} {
					resp, err := client.Get(s.base + p)
					if err != nil {
						b.Fatal(err)
					}
					n, err := io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != 200 || n == 0 {
						b.Fatalf("%s: status %d, %d bytes, %v", p, resp.StatusCode, n, err)
					}
				}
			}
		})
	}
}
