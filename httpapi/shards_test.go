package httpapi

import (
	"net/http"
	"testing"
)

func TestShards(t *testing.T) {
	h := newAPI(t)
	if got := string(h.expect(http.StatusOK, "GET", "/v1/shards", latest, nil).body); got != `{"shards": []}` {
		t.Fatalf("no nodes: %s", got)
	}
	for _, n := range []map[string]any{
		{"name": "a"}, {"name": "b", "shard": "s1"}, {"name": "c", "shard": "s1"}, {"name": "d", "shard": "s0"},
	} {
		h.createNode(n)
	}
	if got := string(h.expect(http.StatusOK, "GET", "/v1/shards?whatever=1", latest, nil).body); got != `{"shards": [{"name": "s1", "count": 2}, {"name": "None", "count": 1}, {"name": "s0", "count": 1}]}` {
		t.Fatalf("shards: %s", got)
	}
	wantFault(t, h.do("GET", "/v1/shards", "1.81", nil), 404, "The API version does not allow shards")
	wantFault(t, h.do("POST", "/v1/shards", "1.81", nil), 405, "The API version does not allow shards")
	wantFault(t, h.do("POST", "/v1/shards", latest, nil), 405, "")
	wantFault(t, h.do("GET", "/v1/shards/s1", latest, nil), 404, "The resource could not be found.")
	h.expect(http.StatusOK, "GET", "/shards", latest, nil) // bookmark path
}
