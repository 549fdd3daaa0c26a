package netboot

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

type nodeGate map[string]bool

func (g nodeGate) AllowNode(_ context.Context, uuid string) bool { return g[uuid] }

func TestVMediaISO(t *testing.T) {
	const booting = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	const idle = "2be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	dir := t.TempDir()
	content := []byte("0123456789abcdef-iso-bytes")
	for _, n := range []string{booting, idle} {
		if err := os.WriteFile(filepath.Join(dir, n+"-00112233445566ff.iso"), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	srv := httptest.NewServer(NewVMedia(VMediaConfig{Dir: dir, Gate: nodeGate{booting: true}}))
	defer srv.Close()
	get := func(name, rng string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/boot/vmedia/"+name, nil)
		if rng != "" {
			req.Header.Set("Range", rng)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	if res, body := get(booting+"-00112233445566ff.iso", ""); res.StatusCode != 200 || body != string(content) {
		t.Errorf("booting node: %d %q", res.StatusCode, body)
	}
	if res, body := get(booting+"-00112233445566ff.iso", "bytes=2-5"); res.StatusCode != http.StatusPartialContent || body != "2345" {
		t.Errorf("Range: %d %q", res.StatusCode, body)
	}
	if res, _ := get(idle+"-00112233445566ff.iso", ""); res.StatusCode != http.StatusNotFound {
		t.Errorf("node not booting: %d, want 404", res.StatusCode)
	}
	for _, bad := range []string{"..%2fcastiron.db", booting + ".iso", booting + "-0011223344556677.iso", "x.iso"} {
		if res, _ := get(bad, ""); res.StatusCode != http.StatusNotFound && res.StatusCode != http.StatusServiceUnavailable {
			t.Errorf("%s: %d, want 404 or 503", bad, res.StatusCode)
		}
	}
}
