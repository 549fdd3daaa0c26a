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
	benchHTTP(b, h, "GET", path, "", http.StatusOK)
}

// benchHTTP sends method to path(i) (with body, when not "") from parallel
// clients as fast as the server answers; any other status than want fails.
func benchHTTP(b *testing.B, h *apiHarness, method string, path func(i int) string, body string, want int) {
	b.Helper()
	client := h.srv.Client()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			var rd io.Reader
			if body != "" {
				rd = strings.NewReader(body)
			}
			req, _ := http.NewRequest(method, h.srv.URL+path(i), rd)
			req.Header.Set(hdrVersion, "1.78")
			res, err := client.Do(req)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != want {
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
	benchHTTP(b, h, "POST", func(int) string { return "/v1/nodes" }, `{"driver": "fake-hardware", "properties": {"cpus": 8}}`, http.StatusCreated)
}
