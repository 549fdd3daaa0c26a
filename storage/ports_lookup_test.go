package storage

import (
	"context"
	"strconv"
	"testing"

	"castiron/fault"
)

func TestLookupPort(t *testing.T) {
	ctx := context.Background()
	s, nodes := openWithNodes(t, "n")
	n := nodes[0]
	named := &Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:0a", Name: ptr("eth0")}
	other := &Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:0b", Name: ptr("12345")}
	for _, p := range []*Port{named, other} {
		mustCreate(t, s.CreatePort, p)
	}
	for _, tc := range []struct{ ident, want string }{
		{named.UUID, named.UUID},
		{"eth0", named.UUID},
		{"52:54:00:00:00:0B", other.UUID},             // MAC, any case
		{strconv.FormatInt(named.ID, 10), named.UUID}, // integer id first
		{"12345", ""},                                 // int-like: looked up as an id, not as a name (Ironic)
		{"nope", ""},
		{"52:54:00:00:00:0c", ""},
	} {
		p, err := s.LookupPort(ctx, tc.ident)
		if tc.want == "" {
			if !fault.Is(err, fault.NotFound) || err.Error() != "storage: no ports row "+tc.ident {
				t.Errorf("LookupPort(%s) = %v, %v; want PortNotFound", tc.ident, p, err)
			}
			continue
		}
		if err != nil || p.UUID != tc.want {
			t.Errorf("LookupPort(%s) = %v, %v; want %s", tc.ident, p, err, tc.want)
		}
	}
}

func TestListPortsByShard(t *testing.T) {
	ctx := context.Background()
	s := openTest(t)
	a, b, c := newNode("a"), newNode("b"), newNode("c")
	a.Shard, b.Shard = ptr("s1"), ptr("s2")
	for _, nd := range []*Node{a, b, c} {
		mustCreateNode(t, s, nd)
	}
	want := map[string]string{}
	for i, nd := range []*Node{a, b, c} {
		p := &Port{NodeUUID: nd.UUID, Address: "52:54:00:00:01:0" + strconv.Itoa(i)}
		mustCreate(t, s.CreatePort, p)
		want[nd.UUID] = p.UUID
	}
	list := func(q PortQuery) []string {
		t.Helper()
		ps, err := s.ListPorts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, p := range ps {
			out = append(out, p.UUID)
		}
		return out
	}
	if got := list(PortQuery{Shards: []string{"s1"}}); len(got) != 1 || got[0] != want[a.UUID] {
		t.Errorf("s1: %v", got)
	}
	if got := list(PortQuery{Shards: []string{"s1", "s2"}}); len(got) != 2 {
		t.Errorf("s1,s2: %v", got)
	}
	if got := list(PortQuery{Shards: []string{"none"}}); len(got) != 0 {
		t.Errorf("none: %v", got)
	}
	if got := list(PortQuery{Shards: []string{}}); len(got) != 0 {
		t.Errorf("empty set: %v", got)
	}
	if got := list(PortQuery{}); len(got) != 3 {
		t.Errorf("no filter: %v", got)
	}
	// Combined with paging: limit and marker still apply inside the shard set.
	got := list(PortQuery{Shards: []string{"s1", "s2"}, Page: Page{Limit: 1}})
	if len(got) != 1 {
		t.Fatalf("limit: %v", got)
	}
	if rest := list(PortQuery{Shards: []string{"s1", "s2"}, Page: Page{Marker: got[0]}}); len(rest) != 1 || rest[0] == got[0] {
		t.Errorf("marker: %v after %v", rest, got)
	}
}
