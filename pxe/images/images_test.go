package images

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func TestHandler(t *testing.T) {
	dir := t.TempDir()
	data := bytes.Repeat([]byte("0123456789"), 1000)
	if err := os.WriteFile(filepath.Join(dir, "disk.raw"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(t.TempDir(), "secret"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(dir, "escape")); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.StripPrefix("", Handler(dir, slog.New(slog.DiscardHandler))))
	defer srv.Close()
	get := func(path, rng string) (int, []byte) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, b
	}
	if st, b := get("/images/disk.raw", ""); st != 200 || !bytes.Equal(b, data) {
		t.Fatalf("full: %d %d bytes", st, len(b))
	}
	if st, b := get("/images/disk.raw", "bytes=10-19"); st != 206 || string(b) != "0123456789" {
		t.Fatalf("range: %d %q", st, b)
	}
	for _, p := range []string{"/images/", "/images/../images/disk.raw", "/images/escape", "/images/nope", "/images/.hidden", "/images/%2e%2e/secret"} {
		if st, _ := get(p, ""); st < 400 {
			t.Errorf("%s: status %d", p, st)
		}
	}
}
