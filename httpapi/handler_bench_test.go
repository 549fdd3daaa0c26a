package httpapi

import (
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

// The handler benchmarks call the API's ServeHTTP directly: castiron's own
// work per request (routing, version, store, rendering) without the
// loopback HTTP that the whole-stack benchmarks share with the client.
// The 10,000 nodes are seeded once per process, not once per b.N round.
// go test -run - -bench Handler -count 6 -cpuprofile cpu.out ./httpapi/

var handlerFixture struct {
	once sync.Once
	h    *apiHarness
	ids  []string
	tb   *onceTB
}

// TestMain stops the shared fixture (server, conductor, temp dir) after
// the run.
func TestMain(m *testing.M) {
	code := m.Run()
	if tb := handlerFixture.tb; tb != nil {
		for i := len(tb.cleanups) - 1; i >= 0; i-- {
			tb.cleanups[i]()
		}
		for _, d := range tb.dirs {
			os.RemoveAll(d)
		}
	}
	os.Exit(code)
}

func handlerAPI(b *testing.B) (http.Handler, []string) {
	b.Helper()
	handlerFixture.once.Do(func() {
		// The fixture outlives this b (it is shared by every round): its
		// cleanups run in TestMain.
		handlerFixture.tb = &onceTB{TB: b}
		h := newAPI(handlerFixture.tb)
		handlerFixture.h, handlerFixture.ids = h, seedNodes(b, h, 10000)
	})
	return handlerFixture.h.srv.Config.Handler, handlerFixture.ids
}

// onceTB keeps newAPI's cleanups and temp dirs for the whole process.
type onceTB struct {
	testing.TB
	cleanups []func()
	dirs     []string
}

func (o *onceTB) Cleanup(f func()) { o.cleanups = append(o.cleanups, f) }
func (o *onceTB) TempDir() string {
	d, err := os.MkdirTemp("", "castiron-bench-")
	if err != nil {
		o.Fatal(err)
	}
	o.dirs = append(o.dirs, d)
	return d
}

func serveBench(b *testing.B, h http.Handler, method string, path func(i int) string, body string, want int) {
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var req *http.Request
		if body != "" {
			req = httptest.NewRequest(method, path(i), strings.NewReader(body))
		} else {
			req = httptest.NewRequest(method, path(i), nil)
		}
		req.Header.Set(hdrVersion, "1.78")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("%s %s: status %d: %s", method, req.URL, rec.Code, rec.Body.String())
		}
	}
}

func BenchmarkHandlerGetNode(b *testing.B) {
	h, ids := handlerAPI(b)
	serveBench(b, h, "GET", func(i int) string { return "/v1/nodes/" + ids[(i*7919)%len(ids)] }, "", 200)
}

func BenchmarkHandlerListNodes100(b *testing.B) {
	h, ids := handlerAPI(b)
	serveBench(b, h, "GET", func(i int) string { return "/v1/nodes?limit=100&marker=" + ids[(i*997)%9900] }, "", 200)
}

func BenchmarkHandlerCreateNode(b *testing.B) {
	h, _ := handlerAPI(b)
	serveBench(b, h, "POST", func(int) string { return "/v1/nodes" },
		`{"driver": "fake-hardware", "properties": {"cpus": 8}}`, 201)
}
