package httpapi

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"castiron/engine"
	"castiron/engine/driver/fake"
	"castiron/storage"
	"castiron/storage/pgtest"
)

// serveWith answers one request through handler as the harness's client
// would send it (same Host, so the same links).
func serveWith(h *apiHarness, handler http.Handler, method, path, ver string) (int, []byte) {
	h.t.Helper()
	req := httptest.NewRequest(method, h.srv.URL+path, nil)
	if ver != "" {
		req.Header.Set(hdrVersion, ver)
	}
	rec := httptest.NewRecorder()
	handler.ServeHTTP(rec, req)
	return rec.Code, rec.Body.Bytes()
}

// TestNodeViewCacheSameBytes: node reads answered from the view cache, on
// the miss that fills it and on the hits after, are byte for byte what the
// API without a cache answers, for every kind of node read and version.
func TestNodeViewCacheSameBytes(t *testing.T) {
	h := newAPI(t)
	quiet := Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), ViewCacheBytes: -1}
	plain := New(h.cond, quiet)
	cached := h.srv.Config.Handler
	var ids []string
	for _, name := range []string{"vc-a", "vc-b", "vc-c", "vc-d"} {
		n := h.createNode(map[string]any{"name": name, "properties": map[string]any{"cpus": 4},
			"driver_info": map[string]any{"ipmi_password": "secret", "ipmi_address": "192.0.2.9"}})
		ids = append(ids, n["uuid"].(string))
	}
	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+ids[1], latest, []map[string]any{{"op": "add", "path": "/extra/k", "value": "v"}})
	paths := []string{
		"/v1/nodes/" + ids[0], "/v1/nodes/vc-b", "/v1/nodes/" + ids[2] + "?fields=uuid,name,conductor,driver_info",
		"/v1/nodes/no-such-node", "/v1/nodes/" + ids[3] + "?fields=nope",
		"/v1/nodes", "/v1/nodes?limit=2", "/v1/nodes?limit=2&marker=" + ids[1], "/v1/nodes/detail",
		"/v1/nodes?detail=true&limit=3", "/v1/nodes?fields=uuid,extra,conductor", "/v1/nodes?conductor=test-conductor",
		"/v1/nodes?conductor=test-conductor&fields=uuid,name", "/v1/nodes?sort_key=name&sort_dir=desc&limit=3",
		"/v1/nodes?provision_state=enroll&fields=name,provision_state",
	}
	for _, ver := range []string{"", "1.1", "1.48", "1.49", "1.78", latest} {
		for _, p := range paths {
			wantCode, want := serveWith(h, plain, "GET", p, ver)
			for try := range 3 {
				code, got := serveWith(h, cached, "GET", p, ver)
				if code != wantCode || !bytes.Equal(got, want) {
					t.Fatalf("GET %s (version %q, try %d): %d\n%s\nwithout the cache: %d\n%s", p, ver, try, code, got, wantCode, want)
				}
			}
		}
	}
}

// TestNodeViewCacheNeverStale: a node written after its view was cached is
// read again, whoever wrote it: this API, or another process writing the
// same database (another conductor), including a node deleted and created
// again under its uuid.
func TestNodeViewCacheNeverStale(t *testing.T) {
	neverStale(t, newAPI(t))
}

// TestNodeViewCacheNeverStalePostgres: the same with the other writer a
// second conductor's store on the same PostgreSQL database.
func TestNodeViewCacheNeverStalePostgres(t *testing.T) {
	db := pgtest.New(t, "fsync=off").Database(t)
	d := fake.New()
	neverStale(t, serveAPIOn(t, db, engine.Config{Hostname: "test-conductor"},
		[]*engine.HardwareType{engine.NewFakeHardware(d), engine.NewManualManagement(d)}))
}

func neverStale(t *testing.T, h *apiHarness) {
	ctx := context.Background()
	other, err := storage.OpenDatabaseWith(ctx, h.dbPath, storage.Config{NonDurableTest: true}) // fsync=off test server
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	n := h.createNode(map[string]any{"name": "fresh"})
	id := n["uuid"].(string)
	get := func() map[string]any { return h.expect(http.StatusOK, "GET", "/v1/nodes/"+id, latest, nil).json(t) }
	list := func() map[string]any {
		l := h.expect(http.StatusOK, "GET", "/v1/nodes?fields=uuid,name,extra", latest, nil).json(t)
		return l["nodes"].([]any)[0].(map[string]any)
	}
	get()
	list()

	h.expect(http.StatusOK, "PATCH", "/v1/nodes/"+id, latest, []map[string]any{{"op": "add", "path": "/extra/by", "value": "api"}})
	if got := get()["extra"]; got.(map[string]any)["by"] != "api" {
		t.Fatalf("after PATCH: extra %v", got)
	}
	if got := list()["extra"]; got.(map[string]any)["by"] != "api" {
		t.Fatalf("list after PATCH: extra %v", got)
	}

	if _, err := other.UpdateNode(ctx, id, func(n *storage.Node) (*storage.Event, error) {
		n.Extra = storage.JSONObject{"by": "other process"}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := get()["extra"]; got.(map[string]any)["by"] != "other process" {
		t.Fatalf("after another process's write: extra %v", got)
	}
	if got := list()["extra"]; got.(map[string]any)["by"] != "other process" {
		t.Fatalf("list after another process's write: extra %v", got)
	}

	if err := other.DeleteNode(ctx, id); err != nil {
		t.Fatal(err)
	}
	h.expect(http.StatusNotFound, "GET", "/v1/nodes/"+id, latest, nil)
	again := &storage.Node{UUID: id, Name: ptr("reborn"), Driver: "fake-hardware", ProvisionState: "enroll"}
	if err := other.CreateNode(ctx, again); err != nil {
		t.Fatal(err)
	}
	if got := get()["name"]; got != "reborn" {
		t.Fatalf("node created again: name %v", got)
	}
	if got := list()["name"]; got != "reborn" {
		t.Fatalf("list of node created again: name %v", got)
	}
}

// TestViewCacheBounded: the cache keeps no more than its budget.
func TestViewCacheBounded(t *testing.T) {
	c := newViewCache(64<<10, nil)
	body := bytes.Repeat([]byte("x"), 1000)
	for i := range 1000 {
		c.put("k", string(rune('a'+i%26))+string(rune(i)), int64(i), "", 0, body)
		if c.size > c.max {
			t.Fatalf("after %d puts: %d bytes, budget %d", i+1, c.size, c.max)
		}
	}
	for i := range 40 {
		c.put(string(rune('A'+i)), "n", 1, "", 0, body)
	}
	if len(c.views) > maxViewKeys || c.size > c.max {
		t.Fatalf("%d view keys, %d bytes", len(c.views), c.size)
	}
	if got := c.get("k", "x", 1, "", 0); got != nil {
		t.Fatal("a view found for a version it was not made from")
	}
}

// TestViewCacheForgetsDeletedNodes: deleting a node, by uuid or by name,
// drops its views at once instead of leaving them until the budget is full.
func TestViewCacheForgetsDeletedNodes(t *testing.T) {
	h := newAPI(t)
	api := New(h.cond, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var ids []string
	for _, name := range []string{"fd-a", "fd-b", "fd-c"} {
		ids = append(ids, h.createNode(map[string]any{"name": name})["uuid"].(string))
	}
	for _, id := range ids {
		for _, p := range []string{"/v1/nodes/" + id, "/v1/nodes/" + id + "?fields=uuid,name"} {
			if code, body := serveWith(h, api, "GET", p, latest); code != http.StatusOK {
				t.Fatalf("GET %s: %d %s", p, code, body)
			}
		}
	}
	if code, _ := serveWith(h, api, "GET", "/v1/nodes", latest); code != http.StatusOK {
		t.Fatal(code)
	}
	has := func(id string) int {
		api.views.mu.RLock()
		defer api.views.mu.RUnlock()
		n := 0
		for _, m := range api.views.views {
			if m[id] != nil {
				n++
			}
		}
		return n
	}
	if has(ids[0]) != 3 || has(ids[1]) != 3 {
		t.Fatalf("views before delete: %d, %d, want 3 each (full, fields, list)", has(ids[0]), has(ids[1]))
	}
	size := api.views.size
	for _, ident := range []string{ids[0], "fd-b"} {
		if code, body := serveWith(h, api, "DELETE", "/v1/nodes/"+ident, latest); code != http.StatusNoContent {
			t.Fatalf("DELETE %s: %d %s", ident, code, body)
		}
	}
	if has(ids[0]) != 0 || has(ids[1]) != 0 || has(ids[2]) != 3 {
		t.Fatalf("views after deleting two nodes: %d, %d, %d, want 0, 0, 3", has(ids[0]), has(ids[1]), has(ids[2]))
	}
	if api.views.size >= size {
		t.Fatalf("cache size %d after deletes, %d before", api.views.size, size)
	}
	// A failed delete leaves the views alone.
	if code, _ := serveWith(h, api, "DELETE", "/v1/nodes/no-such-node", latest); code != http.StatusNotFound {
		t.Fatalf("DELETE of a missing node: %d", code)
	}
	if has(ids[2]) != 3 {
		t.Fatal("views of another node dropped")
	}
}

// TestViewCacheFollowsFleet: without a size given, the budget follows the
// number of nodes (counted in the store), and a fleet that shrinks shrinks
// the cache.
func TestViewCacheFollowsFleet(t *testing.T) {
	h := newAPI(t)
	for i := range 3 {
		h.createNode(map[string]any{"name": "ff-" + string(rune('a'+i))})
	}
	if n, err := h.cond.Store().NodeCount(context.Background()); err != nil || n != 3 {
		t.Fatalf("NodeCount: %d %v, want 3", n, err)
	}
	nodes := 20000
	c := newViewCache(0, func(context.Context) (int, error) { return nodes, nil })
	body := bytes.Repeat([]byte("x"), 4000)
	for i := range 8000 {
		c.put("k", "n"+string(rune(i)), 1, "", 0, body)
	}
	if c.max != maxAutoViewCacheBytes || c.size > c.max || c.size < c.max/2 {
		t.Fatalf("20,000 nodes: budget %d (want %d), holding %d", c.max, maxAutoViewCacheBytes, c.size)
	}
	nodes = 1000
	c.mu.Lock()
	c.sizedAt = time.Time{} // the next put re-counts
	c.mu.Unlock()
	c.put("k", "one-more", 1, "", 0, body)
	if want := budgetFor(1000); c.max != want || c.size > c.max {
		t.Fatalf("1,000 nodes: budget %d (want %d), holding %d", c.max, want, c.size)
	}
	if budgetFor(0) != minViewCacheBytes || budgetFor(10000) != 10000*viewBytesPerNode {
		t.Fatal("budgetFor")
	}
	// An operator's size is kept whatever the fleet.
	fixed := newViewCache(64<<10, func(context.Context) (int, error) { return 1e6, nil })
	fixed.put("k", "n", 1, "", 0, []byte("x"))
	if fixed.max != 64<<10 {
		t.Fatalf("fixed budget became %d", fixed.max)
	}
}
