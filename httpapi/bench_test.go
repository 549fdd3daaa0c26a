package httpapi

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"castiron/storage"
)

// seedNodes creates n fake-hardware nodes straight through the conductor.
func seedNodes(b *testing.B, h *apiHarness, n int) []string {
	b.Helper()
	ids := make([]string, 0, n)
	for i := 0; i < n; i++ {
		nd := &storage.Node{Driver: "fake-hardware", Name: ptr(fmt.Sprintf("bench-%05d", i)),
			Properties: storage.JSONObject{"cpus": 8, "memory_mb": 16384, "local_gb": 100, "cpu_arch": "x86_64"},
			DriverInfo: storage.JSONObject{"ipmi_address": "192.0.2.1", "ipmi_password": "x"}}
		if err := h.cond.CreateNode(context.Background(), nd, true); err != nil {
			b.Fatal(err)
		}
		ids = append(ids, nd.UUID)
	}
	return ids
}

func ptr[T any](v T) *T { return &v }

func benchGet(b *testing.B, h *apiHarness, path func(i int) string) {
	b.Helper()
	client := h.srv.Client()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			req, _ := http.NewRequest("GET", h.srv.URL+path(i), nil)
			req.Header.Set(hdrVersion, "1.78")
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 200 {
				b.Fatalf("status %d", res.StatusCode)
			}
			i++
		}
	})
}

// BenchmarkListNodes100At10k is GET /v1/nodes?limit=100 from the middle of
// 10,000 nodes through the whole HTTP stack.
func BenchmarkListNodes100At10k(b *testing.B) {
	h := newAPI(b)
	ids := seedNodes(b, h, 10000)
	benchGet(b, h, func(i int) string { return "/v1/nodes?limit=100&marker=" + ids[(i*997)%9900] })
}

func BenchmarkGetNodeAt10k(b *testing.B) {
	h := newAPI(b)
	ids := seedNodes(b, h, 10000)
	benchGet(b, h, func(i int) string { return "/v1/nodes/" + ids[(i*7919)%len(ids)] })
}

// BenchmarkCreateNode is POST /v1/nodes through the whole HTTP stack.
func BenchmarkCreateNode(b *testing.B) {
	benchCreate(b, newAPI(b))
}

// benchCreate creates fake-hardware nodes as fast as the server takes them.
func benchCreate(b *testing.B, h *apiHarness) {
	client := h.srv.Client()
	body := `{"driver": "fake-hardware", "properties": {"cpus": 8}}`
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest("POST", h.srv.URL+"/v1/nodes", strings.NewReader(body))
			req.Header.Set(hdrVersion, "1.78")
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != 201 {
				b.Fatalf("status %d", res.StatusCode)
			}
		}
	})
}
