package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeIronic is a tiny in-memory stand-in for the node endpoints the load
// generator uses. Provision verbs take effect one poll later; a node whose
// name ends in "-9" fails cleaning.
type fakeIronic struct {
	mu    sync.Mutex
	order []string
	nodes map[string]map[string]any
}

func newFakeIronic(t *testing.T) *httptest.Server {
	f := &fakeIronic{nodes: map[string]map[string]any{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte(`{"id":"v1"}`)) })
	mux.HandleFunc("POST /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]any
		if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in["driver"] != "fake-hardware" {
			http.Error(w, `{"error_message":"bad"}`, 400)
			return
		}
		f.mu.Lock()
		u := fmt.Sprintf("00000000-0000-0000-0000-%012d", len(f.order))
		n := map[string]any{"uuid": u, "name": in["name"], "provision_state": "enroll", "target_provision_state": nil, "last_error": nil}
		f.nodes[u] = n
		f.order = append(f.order, u)
		b, _ := json.Marshal(n)
		f.mu.Unlock()
		w.WriteHeader(201)
		w.Write(b)
	})
	mux.HandleFunc("GET /v1/nodes", func(w http.ResponseWriter, r *http.Request) {
		limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
		marker := r.URL.Query().Get("marker")
		f.mu.Lock()
		defer f.mu.Unlock()
		start := 0
		if marker != "" {
			for i, u := range f.order {
				if u == marker {
					start = i + 1
				}
			}
		}
		end := min(len(f.order), start+limit)
		out := []map[string]any{}
		for _, u := range f.order[start:end] {
			out = append(out, f.nodes[u])
		}
		res := map[string]any{"nodes": out}
		if len(out) == limit {
			res["next"] = "http://x/v1/nodes?marker=" + f.order[end-1]
		}
		json.NewEncoder(w).Encode(res)
	})
	mux.HandleFunc("GET /v1/nodes/{id}", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		n, ok := f.nodes[r.PathValue("id")]
		if !ok {
			http.Error(w, `{"error_message":"not found"}`, 404)
			return
		}
		b, _ := json.Marshal(n)
		// advance after answering, so the client sees the transient state once
		switch n["provision_state"] {
		case "verifying":
			n["provision_state"], n["target_provision_state"] = "manageable", nil
		case "cleaning":
			if strings.HasSuffix(n["name"].(string), "-9") {
				n["provision_state"], n["last_error"] = "clean failed", "boom"
			} else {
				n["provision_state"], n["target_provision_state"] = "available", nil
			}
		}
		w.Write(b)
	})
	mux.HandleFunc("PUT /v1/nodes/{id}/states/provision", func(w http.ResponseWriter, r *http.Request) {
		var in struct{ Target string }
		json.NewDecoder(r.Body).Decode(&in)
		f.mu.Lock()
		defer f.mu.Unlock()
		n, ok := f.nodes[r.PathValue("id")]
		if !ok {
			http.Error(w, `{"error_message":"not found"}`, 404)
			return
		}
		switch {
		case in.Target == "manage" && n["provision_state"] == "enroll":
			n["provision_state"], n["target_provision_state"] = "verifying", "manageable"
		case in.Target == "provide" && n["provision_state"] == "manageable":
			n["provision_state"], n["target_provision_state"] = "cleaning", "available"
		default:
			http.Error(w, `{"error_message":"bad state"}`, 400)
			return
		}
		w.WriteHeader(202)
	})
	return httptest.NewServer(mux)
}

func testCommon(url string) *common {
	return &common{url: url, target: "fake", apiVersion: "1.78", timeout: 5 * time.Second}
}

func TestCreateListGetLifecycle(t *testing.T) {
	srv := newFakeIronic(t)
	defer srv.Close()
	ctx := context.Background()
	c := testCommon(srv.URL)

	if err := runCreate(ctx, c, []string{"-n", "25", "-workers", "4", "-prefix", "t"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	cl, _ := newClient(c, 1)
	for _, page := range []int{1, 7, 25, 1000} {
		uuids, err := allNodes(ctx, cl, page)
		if err != nil || len(uuids) != 25 {
			t.Fatalf("allNodes(page %d) = %d uuids, %v; want 25", page, len(uuids), err)
		}
	}
	if err := runList(ctx, c, []string{"-duration", "200ms", "-workers", "2", "-limit", "10"}); err != nil {
		t.Fatalf("list: %v", err)
	}
	if err := runGet(ctx, c, []string{"-duration", "200ms", "-workers", "2"}); err != nil {
		t.Fatalf("get: %v", err)
	}
	// names t-lc-0 .. t-lc-8 all succeed
	if err := runLifecycle(ctx, c, []string{"-n", "9", "-workers", "3", "-poll", "1ms", "-prefix", "ok-lc"}); err != nil {
		t.Fatalf("lifecycle: %v", err)
	}
	// node bad-lc-9 ends in "clean failed": must fail loudly
	err := runLifecycle(ctx, c, []string{"-n", "10", "-workers", "3", "-poll", "1ms", "-prefix", "bad-lc"})
	if err == nil || !strings.Contains(err.Error(), "1 of 10") {
		t.Fatalf("lifecycle with a failing node: err = %v, want 1 of 10 failed", err)
	}
}

func TestLoopbackOnly(t *testing.T) {
	for url, ok := range map[string]bool{
		"http://127.0.0.1:6385":  true,
		"http://127.0.0.1:6385/": true,
		"http://[::1]:6385":      true,
		"http://10.0.0.1:6385":   false,
		"http://example.com":     false,
		"ftp://127.0.0.1":        false,
	} {
		_, err := loopbackURL(url)
		if (err == nil) != ok {
			t.Errorf("loopbackURL(%q) err = %v, want ok=%v", url, err, ok)
		}
	}
}

func TestPercentile(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{50: 50 * time.Millisecond, 99: 99 * time.Millisecond, 100: 100 * time.Millisecond, 1: time.Millisecond} {
		if got := percentile(d, p); got != want {
			t.Errorf("percentile(%v) = %v, want %v", p, got, want)
		}
	}
}

func TestTable(t *testing.T) {
	in := `{"target":"ironic","mode":"get","label":"1k","ok":true,"params":{},"figures":{"rps":200,"p50_ms":40,"p99_ms":130}}
{"target":"castiron","mode":"get","label":"1k","ok":true,"params":{},"figures":{"rps":4000,"p50_ms":2,"p99_ms":13}}
{"target":"castiron","mode":"create","label":"1k","ok":false,"params":{},"figures":{"per_s":900},"errors":{"POST /v1/nodes -> 500":3}}
{"target":"ironic","mode":"list","variant":"first","label":"1k","ok":true,"params":{},"figures":{"rps":50}}
{"target":"castiron","mode":"list","variant":"first","label":"1k","ok":true,"params":{},"figures":{"rps":3000}}
`
	recs, err := readRecords(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := writeTable(&b, recs, "ironic,castiron"); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| `GET /v1/nodes/{uuid}`, 1k nodes: req/s | 200 | 4000 | ×20.0 (goal ×50.0: not met) |",
		"| `GET /v1/nodes/{uuid}`, 1k nodes: p99 ms | 130 | 13.0 | ×10.0 |",
		"| `GET /v1/nodes?limit=100`, 1k nodes: req/s | 50.0 | 3000 | ×60.0 (goal ×50.0: met) |",
		"| `POST /v1/nodes`, 1k nodes (filling up): creates/s | — | 900 ⚠ | — |",
		"3 × `POST /v1/nodes -> 500`",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
