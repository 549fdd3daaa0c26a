package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"castiron/storage"
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
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
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
	b.StopTimer()
	// CPU time per request (the whole process: handler, store, GC): on a
	// shared machine it moves far less with the load than ns/op does.
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() - ru0.Utime.Nano() + ru1.Stime.Nano() - ru0.Stime.Nano())
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

func BenchmarkHandlerGetNode(b *testing.B) {
	h, ids := handlerAPI(b)
	serveBench(b, h, "GET", func(i int) string { return "/v1/nodes/" + ids[(i*7919)%len(ids)] }, "", 200)
}

// BenchmarkHandlerGetSameNode is GET of one node again and again, as
// bench/ceiling measures it: the path of a view kept and still current.
func BenchmarkHandlerGetSameNode(b *testing.B) {
	h, ids := handlerAPI(b)
	serveBench(b, h, "GET", func(int) string { return "/v1/nodes/" + ids[0] }, "", 200)
}

// BenchmarkHandlerListSamePage is list100 of one page again and again.
func BenchmarkHandlerListSamePage(b *testing.B) {
	h, _ := handlerAPI(b)
	serveBench(b, h, "GET", func(int) string { return "/v1/nodes?limit=100" }, "", 200)
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

// BenchmarkRenderNode is the view of one inspected node at the latest
// version, without the store: the rendering part of GET /v1/nodes/{uuid}.
func BenchmarkRenderNode(b *testing.B) {
	api := newAPI(b).srv.Config.Handler.(*API)
	now := time.Now()
	n := &storage.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Name: ptr("rack1-node07"), Driver: "ipmi",
		ProvisionState: "available", PowerState: ptr("power off"), ResourceClass: ptr("baremetal"),
		CreatedAt: now, UpdatedAt: &now, ProvisionUpdatedAt: &now, Traits: []string{"CUSTOM_GPU", "CUSTOM_RACK_A"},
		Properties: storage.JSONObject{"cpus": 32.0, "memory_mb": 131072.0, "local_gb": 930.0, "cpu_arch": "x86_64",
			"capabilities": "boot_mode:uefi", "root_device": map[string]any{"serial": "S3EVNX0M"}},
		DriverInfo: storage.JSONObject{"ipmi_address": "10.0.3.7", "ipmi_username": "admin", "ipmi_password": "secret",
			"deploy_kernel": "http://pxe/ipa.kernel", "deploy_ramdisk": "http://pxe/ipa.initramfs"},
		DriverInternalInfo: storage.JSONObject{"last_power_state_change": "2025-01-01T00:00:00.000000", "agent_url": "http://10.0.3.70:9999"},
		Extra:              storage.JSONObject{"rack": "r1", "u": 7.0}, InstanceInfo: storage.JSONObject{}, CleanStep: storage.JSONObject{},
		DeployStep: storage.JSONObject{}, ServiceStep: storage.JSONObject{}, RAIDConfig: storage.JSONObject{},
		TargetRAIDConfig: storage.JSONObject{}, NetworkData: storage.JSONObject{}}
	req := httptest.NewRequest("GET", "/v1/nodes/"+n.UUID, nil)
	req = req.WithContext(withVersion(req.Context(), Version{Minor: MaxMinor}))
	v := api.view(req)
	var buf bytes.Buffer
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		buf.Reset()
		nodeTable.render(&buf, v, n, nil)
	}
}
