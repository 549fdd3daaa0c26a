package main

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestPageNodesAndTopUUID(t *testing.T) {
	for _, tc := range []struct {
		body  string
		nodes int
		uuid  string
	}{
		{`{"nodes": [], "next": "x"}`, 0, ""},
		{` {"nodes":[{"uuid":"a","links":[{"href":"h]}\"","rel":"self"}]},{"uuid":"b"}]} `, 2, ""},
		{`{"uuid": "u-1", "extra": {"uuid": "nested"}, "traits": ["a", "b"], "n": -1.5e3, "t": true, "z": null}`, -1, "u-1"},
		{`{"extra": {"uuid": "nested"}, "uuid": "u\u002d2"}`, -1, "u-2"},
		{`{"nodes": [{"uuid": "a"}, {"uuid": "b"}}`, -1, ""},  // bracket mismatch
		{`{"nodes": [{"uuid": "a"}, {"uuid": "b"]]}`, -1, ""}, // bracket mismatch
		{`{"nodes": [{"uuid": "a}, {"uuid": "b"}]}`, -1, ""},  // string left open
		{`{"nodes": [{"uuid": "a"} {"uuid": "b"}]}`, -1, ""},  // no comma
		{`{"uuid": "u"} trailing`, -1, ""},                    // not one object
		{`[{"uuid": "u"}]`, -1, ""},                           // not an object
		{`{"nodes": 3}`, -1, ""},                              // not an array
		{"{\"uuid\": \"a\nb\"}", -1, ""},                      // control character in a string
	} {
		if got := pageNodes([]byte(tc.body)); got != tc.nodes {
			t.Errorf("pageNodes(%s) = %d, want %d", tc.body, got, tc.nodes)
		}
		if got := topUUID([]byte(tc.body)); got != tc.uuid {
			t.Errorf("topUUID(%s) = %q, want %q", tc.body, got, tc.uuid)
		}
	}
}

// TestPageNodesMatchesDecoding: on random node lists (nesting, escapes,
// every JSON kind) the structural walk counts what encoding/json decodes.
func TestPageNodesMatchesDecoding(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var value func(depth int) any
	value = func(depth int) any {
		switch k := r.IntN(8); {
		case k == 0 || depth > 3:
			return []string{"plain", `quote " and \ backslash`, "ünï\u2028", "]}{[", ""}[r.IntN(5)]
		case k == 1:
			return r.Float64() * 1e6
		case k == 2:
			return r.IntN(2) == 0
		case k == 3:
			return nil
		case k <= 5:
			l := make([]any, r.IntN(4))
			for i := range l {
				l[i] = value(depth + 1)
			}
			return l
		default:
			m := map[string]any{}
			for i := range r.IntN(4) {
				m[fmt.Sprintf("k%d\"]", i)] = value(depth + 1)
			}
			return m
		}
	}
	for i := range 500 {
		nodes := make([]any, r.IntN(12))
		for j := range nodes {
			nodes[j] = map[string]any{"uuid": fmt.Sprintf("u-%d-%d", i, j), "extra": value(0)}
		}
		b, err := json.MarshalIndent(map[string]any{"nodes": nodes, "next": value(0)}, "", []string{"", " ", "\t"}[i%3])
		if err != nil {
			t.Fatal(err)
		}
		if got := pageNodes(b); got != len(nodes) {
			t.Fatalf("pageNodes = %d, want %d: %s", got, len(nodes), b)
		}
		if len(nodes) > 0 {
			one, _ := json.Marshal(nodes[0])
			if got := topUUID(one); got != fmt.Sprintf("u-%d-0", i) {
				t.Fatalf("topUUID = %q: %s", got, one)
			}
		}
	}
}
